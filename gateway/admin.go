package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/gateway/decisions"
	"github.com/turngate/turngate/gateway/liveconfig"
	"github.com/turngate/turngate/gateway/metrics"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

// rulesStatus serves GET /v1/admin/rules, the console's Overview: the live
// revision, its files, when it loaded, the reload history with the
// positioned errors of rejected ones, its tests, the shadow rules'
// disagreement counts, and the kill switches and quotas in force. A tenant
// admin sees only the kill switches and quotas that apply to its tenant,
// its own tenant's shadow disagreements (from the decision store), and
// neither the host's rules directory nor this replica's per-rule shadow
// counts, which are every tenant's.
func (s *Server) rulesStatus(c *gin.Context) error {
	st := s.rules.Status()
	if !decisionScope(principal(c)).AllTenants {
		st.Dir = ""
	}
	kills := s.visibleKillSwitches(principal(c))
	quotas, usageErr := s.quotaViews(c.Request.Context(), decisionScope(principal(c)))
	usageError := ""
	if usageErr != nil {
		s.log.Warn("reading the quotas' usage for the overview", "err", usageErr)
		usageError = "the quotas' usage could not be read: the store did not answer"
	}
	replicas, err := s.replicaRevisions(c.Request.Context())
	replicasError := ""
	if err != nil {
		s.log.Warn("reading the replicas' revisions for the overview", "err", err)
		replicasError = "the other replicas' revisions could not be read: the store did not answer"
	}
	cov, covErrs := s.rules.Current().LiveCoverage(c.Request.Context())
	disagreements, disagreementsError := s.shadowDisagreements(c.Request.Context(), decisionScope(principal(c)))
	var shadowRules []metrics.ShadowCount
	if decisionScope(principal(c)).AllTenants {
		shadowRules = s.metrics.ShadowCounts()
	}
	c.JSON(http.StatusOK, struct {
		ruleset.Status
		// Dir is the rules directory on the replica's host, shown to a
		// global admin only.
		Dir string `json:"dir,omitempty"`
		// Replica names the replica whose revision this is: each replica
		// loads its rules itself.
		Replica string `json:"replica"`
		// Replicas are the revisions every replica of a shared store
		// (PostgreSQL) last reported, by replica; absent on SQLite.
		Replicas []replicaRevision `json:"replicas,omitempty"`
		// ReplicasError says why Replicas is missing.
		ReplicasError string `json:"replicasError,omitempty"`
		// KillSwitches are the kill switches in force, which stop calls
		// and turns before any rule runs: no reload lifts them.
		KillSwitches []store.KillSwitch `json:"killSwitches"`
		// ShadowRules count each shadow rule's firings on this replica,
		// every tenant's: shown to a global admin only (absent, not [],
		// for a tenant admin).
		ShadowRules []metrics.ShadowCount `json:"shadowRules,omitzero"`
		// ShadowDisagreements counts the stored decisions the shadow rules
		// would have decided otherwise, the principal's tenant's or, for a
		// global admin, every tenant's, on every replica.
		ShadowDisagreements *shadowDisagreements `json:"shadowDisagreements,omitempty"`
		// ShadowDisagreementsError says why ShadowDisagreements is missing.
		ShadowDisagreementsError string `json:"shadowDisagreementsError,omitempty"`
		// Quotas are the configured quotas (config "quotas") with their
		// current usage.
		Quotas []quotaView `json:"quotas"`
		// QuotaUsageError says why the quotas' usage is missing.
		QuotaUsageError string `json:"quotaUsageError,omitempty"`
		// Coverage is what the live revision's tests exercise (absent
		// without tests), measured on the first request that asks.
		Coverage *ruleset.Coverage `json:"coverage,omitempty"`
		// CoverageErrors say why it could not be measured.
		CoverageErrors policy.Errors `json:"coverageErrors,omitempty"`
	}{st, st.Dir, s.conf().Replica.ID, replicas, replicasError, kills, shadowRules, disagreements, disagreementsError, quotas, usageError, cov, covErrs})
	return nil
}

// shadowWindow is how far back the Overview counts shadow disagreements
// in the decision store, or decisions.retention when that is shorter.
const shadowWindow = 24 * time.Hour

// shadowDisagreements is the Overview's count of stored decisions whose
// shadow rules would have decided otherwise.
type shadowDisagreements struct {
	// Tenant is the tenant counted; "" for every tenant's decisions (a
	// global admin's count).
	Tenant string `json:"tenant,omitempty"`
	// Since is where the window starts: Window before the request.
	Since time.Time `json:"since"`
	// Window is the window's length: 24h, or decisions.retention when
	// that is shorter (older records are pruned).
	Window string `json:"window"`
	// Count is how many decisions of the window, on every replica, the
	// shadow rules would have decided otherwise.
	Count int64 `json:"count"`
}

// shadowDisagreements counts the stored decisions of scope's tenant (every
// tenant's for a global admin) whose shadow changed in the last
// shadowWindow, or says why it cannot: the decision store is off or did
// not answer.
func (s *Server) shadowDisagreements(ctx context.Context, scope decisions.Scope) (*shadowDisagreements, string) {
	if !s.conf().Decisions.Stored() {
		return nil, "the decision store is off (decisions.store: false): no disagreements are counted"
	}
	window := shadowWindow
	if r := s.conf().Decisions.Retention; r > 0 && r < window {
		window = r
	}
	d := shadowDisagreements{Since: time.Now().Add(-window).UTC(), Window: window.String()}
	if !scope.AllTenants {
		d.Tenant = scope.Tenant
	}
	n, err := s.store.CountShadowChanged(ctx, d.Tenant, d.Since)
	if err != nil {
		s.log.Warn("counting the shadow disagreements for the overview", "err", err)
		return nil, "the shadow disagreements could not be counted: the store did not answer"
	}
	d.Count = n
	return &d, ""
}

// rulesReload serves POST /v1/admin/rules/reload. A rejected candidate is
// a 422 whose "errors" are the positioned diagnostics; the last good
// revision keeps serving. The rules are every tenant's: a tenant admin is
// refused (403), as with a fleet-wide kill switch.
func (s *Server) rulesReload(c *gin.Context) error {
	if !decisionScope(principal(c)).AllTenants {
		return errorf(http.StatusForbidden, CodeForbidden,
			"reloading the rules changes every tenant's revision: it needs the %q role beside %q", RoleGlobalAdmin, RoleAdmin)
	}
	changed, err := s.rules.Reload()
	if err != nil {
		ae := errorf(http.StatusUnprocessableEntity, CodeRulesInvalid, "the rules were rejected (they do not compile or their tests fail); the last good revision keeps serving")
		var errs policy.Errors
		if errors.As(err, &errs) {
			ae.Details = errs
		}
		return ae
	}
	if s.rep != nil {
		s.rep.revisions.check(c.Request.Context()) // the other replicas' Overview shows it at once
	}
	c.JSON(http.StatusOK, gin.H{"changed": changed, "revision": s.rules.Current().ID()})
	return nil
}

// evalRequest is the body of POST /v1/admin/rules/eval.
type evalRequest struct {
	Hook  string          `json:"hook"`
	Input json.RawMessage `json:"input"`
	// Candidate, when present, is evaluated beside the live revision.
	Candidate *candidateRequest `json:"candidate"`
	// Explain adds to each result the rules that did not fire and why
	// (ruleset.Revision.Explain).
	Explain bool `json:"explain"`
}

// candidateRequest is a candidate revision posted as its rule files, by
// name (POST /v1/admin/rules/eval and /v1/admin/replay).
type candidateRequest struct {
	Files map[string]string `json:"files"`
}

// evalComparison is the answer of POST /v1/admin/rules/eval with a
// candidate: the same input on the live revision and on the candidate.
type evalComparison struct {
	Live      *ruleset.EvalResult `json:"live"`
	Candidate *ruleset.EvalResult `json:"candidate"`
}

// rulesEval serves POST /v1/admin/rules/eval: a dry run of one hook on the
// live revision with a supplied context, as `turngate eval` does. The hook
// may be left out when the input names its own (a document eval printed,
// a decision line of the audit log). With a candidate (rule files by name)
// the answer is {live, candidate}: the same input on both; a candidate
// that does not load is refused whole, a 400 with the positioned errors.
// Both evaluations share the deadline decisions.EvalTimeout, as do their
// explanations when explain is set.
func (s *Server) rulesEval(c *gin.Context) error {
	data, err := readBody(c)
	if err != nil {
		return err
	}
	var req evalRequest
	if err := decodeStrictJSON(data, &req); err != nil {
		return err
	}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		return errField("input", "is required: the hook's context as a JSON object")
	}
	var cand *ruleset.Revision
	if req.Candidate != nil {
		if cand, err = decisions.Candidate(req.Candidate.Files); err != nil {
			return candidateError(err)
		}
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), decisions.EvalTimeout)
	defer cancel()
	live := s.rules.Current()
	res, err := live.Eval(ctx, req.Hook, req.Input)
	if err != nil {
		return errBadRequest("%v", err)
	}
	if req.Explain {
		live.Explain(ctx, res)
	}
	if cand == nil {
		c.JSON(http.StatusOK, res)
		return nil
	}
	candRes, err := cand.Eval(ctx, req.Hook, req.Input)
	if err != nil {
		return errField("candidate", "cannot evaluate this input: %v", err)
	}
	if req.Explain {
		cand.Explain(ctx, candRes)
	}
	c.JSON(http.StatusOK, evalComparison{Live: res, Candidate: candRes})
	return nil
}

// configStatus serves GET /v1/admin/config: the live configuration's
// revision, when it loaded, and the reload history with the positioned
// errors of rejected reloads (liveconfig.Status). The file is the
// fleet's, every tenant's: a tenant admin is refused (403 naming
// global-admin). A gateway started without a config file (the embedded
// default) reloads nothing: 404.
func (s *Server) configStatus(c *gin.Context) error {
	if !decisionScope(principal(c)).AllTenants {
		return errorf(http.StatusForbidden, CodeForbidden, "the configuration is every tenant's: its status needs the %q role", RoleGlobalAdmin)
	}
	if s.liveConfig == nil {
		return errorf(http.StatusNotFound, CodeNotFound, "the gateway runs the embedded default configuration (no --config file): nothing reloads")
	}
	c.JSON(http.StatusOK, struct {
		liveconfig.Status
		// Replica names the replica whose configuration this is: each
		// replica reloads its own file.
		Replica string `json:"replica"`
	}{s.liveConfig.Status(), s.conf().Replica.ID})
	return nil
}
