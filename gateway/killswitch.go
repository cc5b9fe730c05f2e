package gateway

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/audit"
	"github.com/turngate/turngate/gateway/killswitch"
	"github.com/turngate/turngate/gateway/store"
)

// The kill switch's HTTP face (POST, GET, DELETE /v1/admin/killswitch,
// admin role); the switches themselves are package killswitch.

// CodeKillSwitch answers a turn a kill switch stopped.
const CodeKillSwitch = "kill_switch"

// killSwitchPoll is how often a replica of a shared store reads the
// switches without a notification (a variable for the tests).
var killSwitchPoll = killswitch.PollInterval

// newKillSwitches makes the gateway's kill switches on its store: stops
// are decision records in the audit log and counted in the metrics.
func (s *Server) newKillSwitches(now func() time.Time) *killswitch.Switches {
	return killswitch.New(killswitch.Options{
		Now:     now,
		Store:   s.store,
		Record:  s.audit.Record,
		Stopped: func(what, scope string) { s.metrics.KillSwitchStops.WithLabelValues(what, scope).Inc() },
		Logger:  s.log,
	})
}

// startKillSwitches reads the switches before the gateway serves (a
// gateway that cannot read them does not start) and, when replicas share
// the store, keeps reading them: at every notification and every
// killswitch.PollInterval.
func (s *Server) startKillSwitches(ctx context.Context) error {
	if err := s.kill.Load(ctx); err != nil {
		return fmt.Errorf("reading the kill switches: %w", err)
	}
	if s.rep == nil {
		return nil // one process: its own Set and Lift apply at once
	}
	pctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.kill.Run(pctx, killSwitchPoll) }()
	s.stopKill = func() { cancel(); <-done }
	return nil
}

// knownTools are the names of the tools the gateway knows now: configured,
// named by an agent, or listed by an MCP server.
func (s *Server) knownTools() []string {
	names := map[string]bool{}
	for name := range s.tools {
		names[name] = true
	}
	for _, a := range s.agents() {
		for _, name := range a.toolNames {
			names[name] = true
		}
	}
	if s.mcp != nil {
		for _, t := range s.mcp.Tools() {
			names[t.Name] = true
		}
	}
	return slices.Sorted(maps.Keys(names))
}

// setKillSwitch serves POST /v1/admin/killswitch: it checks the switch
// strictly (a misspelt key, block, agent, tenant or tool is a 400 naming it, never
// a switch that stops nothing), stores it, applies it on this replica and
// audits who set it and why. 201 with the switch.
func (s *Server) setKillSwitch(c *gin.Context) error {
	data, err := readBody(c)
	if err != nil {
		return err
	}
	var spec killswitch.Spec
	if err := decodeStrictJSON(data, &spec); err != nil {
		return err
	}
	p := principal(c)
	k, err := spec.Switch(killswitch.Known{Agents: slices.Sorted(maps.Keys(s.agents())), Tenants: s.conf().Tenants(), Tools: s.knownTools()}, p.Subject, s.kill.Now())
	if err != nil {
		return errBadRequest("%v", err)
	}
	if !decisionScope(p).AllTenants && k.Tenant != p.Tenant {
		return errorf(http.StatusForbidden, CodeForbidden,
			"a tenant admin sets kill switches of its own tenant only (\"scope\": {\"tenant\": %q}); a fleet-wide switch or another tenant's needs the %q role", p.Tenant, RoleGlobalAdmin)
	}
	if err := s.kill.Set(c.Request.Context(), k); err != nil {
		return err
	}
	s.audit.KillSwitch(&audit.KillSwitch{Time: k.CreatedAt, Action: audit.KillSwitchSet, RequestID: requestID(c), By: p.Subject, ByTenant: p.Tenant,
		Reason: k.Reason, Switch: *k, Replica: s.conf().Replica.ID})
	s.log.Warn("kill switch set", "id", k.ID, "block", k.Block, "tools", k.Tools, "tenant", k.Tenant, "agent", k.Agent, "by", p.Subject)
	c.JSON(http.StatusCreated, k)
	return nil
}

// listKillSwitches serves GET /v1/admin/killswitch: the switches in force
// on this replica, a tenant admin's those of its tenant and the fleet's.
func (s *Server) listKillSwitches(c *gin.Context) error {
	c.JSON(http.StatusOK, gin.H{"killSwitches": s.visibleKillSwitches(principal(c)), "replica": s.conf().Replica.ID})
	return nil
}

// visibleKillSwitches are the switches in force p may see: every one for
// a global admin, else those of p's tenant and the fleet-wide ones (which
// stop p's tenant too).
func (s *Server) visibleKillSwitches(p engine.Principal) []store.KillSwitch {
	all := decisionScope(p).AllTenants
	out := []store.KillSwitch{}
	for _, k := range s.kill.Active() {
		if all || k.Tenant == "" || k.Tenant == p.Tenant {
			out = append(out, k)
		}
	}
	return out
}

// liftRequest is the optional body of DELETE /v1/admin/killswitch/:id.
type liftRequest struct {
	Reason string `json:"reason,omitempty"`
}

// liftKillSwitch serves DELETE /v1/admin/killswitch/:id: it lifts the
// switch (404 when none is in force by that id) and audits who and why.
func (s *Server) liftKillSwitch(c *gin.Context) error {
	var req liftRequest
	if err := decodeOptionalBody(c, &req); err != nil {
		return err
	}
	if err := killswitch.CheckLiftReason(req.Reason); err != nil {
		return errBadRequest("%v", err)
	}
	p := principal(c)
	if !decisionScope(p).AllTenants {
		// A tenant admin lifts its tenant's switches only: another
		// tenant's is not found, a fleet-wide one is not its to lift.
		for _, k := range s.visibleKillSwitches(p) {
			if k.ID == c.Param("id") && k.Tenant != p.Tenant {
				return errorf(http.StatusForbidden, CodeForbidden, "kill switch %q is fleet-wide: lifting it needs the %q role", k.ID, RoleGlobalAdmin)
			}
		}
		if !slices.ContainsFunc(s.visibleKillSwitches(p), func(k store.KillSwitch) bool { return k.ID == c.Param("id") }) {
			return errorf(http.StatusNotFound, CodeNotFound, "no kill switch %q is in force", c.Param("id"))
		}
	}
	k, err := s.kill.Lift(c.Request.Context(), c.Param("id"))
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errorf(http.StatusNotFound, CodeNotFound, "no kill switch %q is in force", c.Param("id"))
		}
		return err
	}
	s.audit.KillSwitch(&audit.KillSwitch{Time: s.kill.Now(), Action: audit.KillSwitchLifted, RequestID: requestID(c), By: p.Subject, ByTenant: p.Tenant,
		Reason: req.Reason, Switch: *k, Replica: s.conf().Replica.ID})
	s.log.Warn("kill switch lifted", "id", k.ID, "by", p.Subject)
	c.JSON(http.StatusOK, k)
	return nil
}

// killSwitchError is the refusal of a turn a switch stopped: 403, the
// fixed text, and no Retry-After (it lasts until an operator lifts it).
func killSwitchError() *apiError {
	return &apiError{Status: http.StatusForbidden, Code: CodeKillSwitch, Message: killswitch.TurnReason}
}
