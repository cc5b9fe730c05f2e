// Package store is the gateway's persistence: sessions and their transcripts
// (the source of truth for chat history), durable submissions and the audit
// of turn outcomes.
//
// Every read or write of session data takes the caller's tenant. Sessions are
// named by (tenant, id), so a session of another tenant behaves exactly like a
// missing one: ErrNotFound, and creating it creates the caller's own session.
//
// Store is the interface the gateway uses. SQLite (a file, the embedded
// default) and Postgres (a PostgreSQL database) implement it with the same
// semantics, and the store's tests run against both. Each keeps an
// in-process transcript cache. SQLite's serves the one process of its file.
// PostgreSQL's serves several gateway replicas on one database: its cache
// entries carry the session's stored version, checked on every read (see
// Postgres), and session leases with fencing tokens (Lease) keep one turn
// per session across replicas.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/turngate/turngate/engine"
)

// ErrNotFound reports a missing session, message or submission, including one
// that belongs to another tenant.
var ErrNotFound = errors.New("store: not found")

// ErrConflict reports a write that contradicts stored state: appending a
// message whose id is already in the session, or finishing a submission that
// is already finished.
var ErrConflict = errors.New("store: conflict")

// ErrInvalid reports an argument the store refuses: an empty tenant, session
// id, agent, message id or role, JSON that does not parse, or a status that
// does not fit.
var ErrInvalid = errors.New("store: invalid argument")

// ErrQueueFull reports a submission refused because its session's or its
// tenant's queue is full (see QueueFullError).
var ErrQueueFull = errors.New("store: submission queue is full")

// QueueLimits bound the queued submissions CreateSubmission accepts; 0 is
// no bound.
type QueueLimits struct {
	// PerSession bounds the queued submissions of one session.
	PerSession int
	// PerTenant bounds the queued submissions of one tenant, over all of
	// its sessions.
	PerTenant int
}

// QueueFullError is CreateSubmission's refusal of a submission beyond
// QueueLimits.
type QueueFullError struct {
	// Scope is "session" or "tenant": the bound that was reached.
	Scope string
	// Limit is that bound.
	Limit int
}

func (e *QueueFullError) Error() string {
	return fmt.Sprintf("%v: the %s already has %d queued submissions", ErrQueueFull, e.Scope, e.Limit)
}

// Unwrap makes errors.Is(err, ErrQueueFull) hold.
func (e *QueueFullError) Unwrap() error { return ErrQueueFull }

// ErrSchemaTooNew reports a database migrated by a newer binary than this one.
var ErrSchemaTooNew = errors.New("store: database schema is newer than this binary")

// Submission statuses. A submission starts queued, becomes running when a
// worker claims it, and ends in one of the four final statuses.
const (
	StatusQueued    = "queued"
	StatusRunning   = "running"
	StatusCompleted = "completed"
	StatusError     = "error"
	StatusAborted   = "aborted"
	StatusSkipped   = "skipped"
)

// Store persists the gateway's sessions, transcripts, submissions and turn
// audit. Implementations are safe for concurrent use.
type Store interface {
	// StateStore keeps the events of declared rule state.
	StateStore

	// GetOrCreateSession returns the tenant's session id, creating it for
	// agent when absent; created reports whether it was created. An existing
	// session is returned as stored, whatever its agent.
	GetOrCreateSession(ctx context.Context, tenant, agent, id string) (s *Session, created bool, err error)
	// GetSession returns the tenant's session id, or ErrNotFound.
	GetSession(ctx context.Context, tenant, id string) (*Session, error)
	// SetLastBody stores the extra body of the session's latest request
	// (nil clears it).
	SetLastBody(ctx context.Context, tenant, id string, body json.RawMessage) error

	// Admit stores a turn's admission atomically, in one transaction: it
	// creates the tenant's session for agent when absent, sets its last
	// body (nil clears it) and, when user is not nil, appends user to the
	// transcript (ErrConflict when its id is already there). It returns the
	// session as stored. When the session exists with another agent, Admit
	// writes nothing and returns that session: the caller tells by its Agent.
	Admit(ctx context.Context, tenant, agent, sessionID string, lastBody json.RawMessage, user *engine.UIMessage) (*Session, error)

	// Messages returns the session's transcript in order.
	Messages(ctx context.Context, tenant, sessionID string) ([]engine.UIMessage, error)
	// Transcript returns the tenant's session and its transcript in order,
	// read together as one snapshot (one query where GetSession and
	// Messages take two); ErrNotFound when there is no such session.
	Transcript(ctx context.Context, tenant, sessionID string) (*Session, []engine.UIMessage, error)
	// AppendMessage adds m at the end of the transcript; ErrConflict when a
	// message with m.ID is already there.
	AppendMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage) error
	// UpsertMessage replaces the message with m.ID in place, keeping its
	// position, or appends m when there is none.
	UpsertMessage(ctx context.Context, tenant, sessionID string, m engine.UIMessage) error
	// TruncateAfter deletes every message after messageID, and messageID
	// itself when inclusive; ErrNotFound when messageID is not in the session.
	TruncateAfter(ctx context.Context, tenant, sessionID, messageID string, inclusive bool) error

	// CreateSubmission stores s as queued (creating its session when absent)
	// and returns the stored copy. When s.IdempotencyKey repeats a key of the
	// same tenant and session, the earlier submission is returned unchanged
	// with existing true. An empty s.ID is filled with a new UUID. When
	// limits bound the queue and the session, or the tenant, already has
	// that many queued submissions, nothing is stored and the error is a
	// *QueueFullError (errors.Is ErrQueueFull); the check and the insert are
	// atomic across processes.
	CreateSubmission(ctx context.Context, s *Submission, limits QueueLimits) (stored *Submission, existing bool, err error)
	// GetSubmission returns the tenant's submission id in sessionID, or
	// ErrNotFound.
	GetSubmission(ctx context.Context, tenant, sessionID, id string) (*Submission, error)
	// ClaimSubmission marks the oldest claimable submission running,
	// claimed by owner (a replica id) until ttl from now, counts the
	// attempt and returns it; ErrNotFound when none is claimable. A queued
	// submission is claimable, and so is a running one whose claim has
	// expired (its replica died or stopped renewing): another replica takes
	// it over. A submission is claimable only when no earlier submission of
	// its session is queued or running, so each session's submissions run
	// one at a time in order. Concurrent claimers, in one process or
	// several, never get the same claim. The returned Attempts names the
	// claim (see FinishSubmission).
	ClaimSubmission(ctx context.Context, owner string, ttl time.Duration) (*Submission, error)
	// RenewSubmission extends the claim sub (as ClaimSubmission returned
	// it) to ttl from now; ErrFenced when it is no longer sub's claim:
	// taken over by another claimer or finished.
	RenewSubmission(ctx context.Context, sub *Submission, ttl time.Duration) error
	// FinishSubmission records a final status (completed, error, aborted or
	// skipped) and result for a submission. claim is the Attempts of the
	// claim that ran it, 0 for a queued submission finished without
	// running. ErrConflict when it is already finished; ErrFenced when it
	// is running under another claim than claim (or claim is 0), or queued
	// again after claim: nothing is stored.
	FinishSubmission(ctx context.Context, id string, claim int, status string, result json.RawMessage) error
	// SetSubmissionRequest replaces the stored request of a submission
	// running under claim (the beforePersist rules' masking of its
	// messages, once its turn stored them); ErrFenced when it is not
	// running under that claim: nothing is stored.
	SetSubmissionRequest(ctx context.Context, id string, claim int, request json.RawMessage) error
	// RequeueRunning puts back in the queue the running submissions that no
	// live process holds, and returns how many it moved. On SQLite, whose
	// file serves one process, that is every running submission: call it at
	// startup, before any worker claims. On PostgreSQL it is those whose
	// claim has expired (which ClaimSubmission takes over anyway), so
	// replicas that start while others run leave the others' work alone.
	RequeueRunning(ctx context.Context) (int, error)
	// DropQueued finishes every queued submission of the tenant's session
	// as aborted (result {"error": "dropped"}) and returns how many; a
	// running one is left to its turn.
	DropQueued(ctx context.Context, tenant, sessionID string) (int, error)

	// AcquireLease takes the turn lease of the tenant's session for owner
	// until ttl from now, with a fencing token greater than every earlier
	// acquisition's; ErrLeaseHeld while another holding has not expired
	// (one of owner's own too: a lease is not reentrant), or while waiters
	// queue for it (PostgreSQL: see Relay.Enqueue; the caller queues
	// behind them). The session need not exist. See Lease and WithLease.
	AcquireLease(ctx context.Context, tenant, sessionID, owner string, ttl time.Duration) (*Lease, error)
	// RenewLease extends l to ttl from now (updating l.Expires) and reports
	// whether CancelLease asked its turn to stop and whether a reader on
	// another replica follows its stream (Relay.FollowStream); ErrFenced
	// when l is no longer the session's lease, ErrLeaseReleased when it was
	// released (a renewal never brings a released lease back).
	RenewLease(ctx context.Context, l *Lease, ttl time.Duration) (LeaseState, error)
	// ReleaseLease ends l, if it is still the session's lease, so the next
	// acquisition need not wait for it to expire.
	ReleaseLease(ctx context.Context, l *Lease) error
	// CancelLease asks the holder of the session's unexpired lease to
	// cancel its turn (RenewLease reports it) and reports whether there
	// was one. A token other than 0 cancels only the holding of that
	// token (Lease.Token), so a cancel meant for a turn that has ended
	// does not reach the session's next one.
	CancelLease(ctx context.Context, tenant, sessionID string, token int64) (bool, error)

	// RecordTurn appends a turn outcome to the audit.
	RecordTurn(ctx context.Context, t *TurnRecord) error
	// FinishTurn stores the end of a turn atomically: UpsertMessage of m
	// and RecordTurn of rec in one transaction, so either both are stored
	// or neither. rec must name tenant and sessionID (else ErrInvalid).
	// With a ctx of WithRelease, the same transaction releases the lease.
	FinishTurn(ctx context.Context, tenant, sessionID string, m engine.UIMessage, rec *TurnRecord) error
	// Turns returns the tenant's turn records for sessionID, oldest first.
	Turns(ctx context.Context, tenant, sessionID string) ([]TurnRecord, error)

	// CreateApprovals stores approvals as pending, all or none;
	// ErrConflict when an id is taken.
	CreateApprovals(ctx context.Context, as []Approval) error
	// GetApproval returns the tenant's approval id, or ErrNotFound.
	GetApproval(ctx context.Context, tenant, id string) (*Approval, error)
	// ListApprovals returns the tenant's approvals that match f, oldest
	// first.
	ListApprovals(ctx context.Context, tenant string, f ApprovalFilter) ([]Approval, error)
	// CountPendingApprovals returns how many approvals each tenant has
	// pending; a tenant with none is absent.
	CountPendingApprovals(ctx context.Context) (map[string]int, error)
	// DecideApproval decides the tenant's pending approval id once, as d
	// says, and returns the decided approval; ErrNotFound when there is no
	// such approval, ErrConflict when it is decided already or (for
	// approved and denied) expired at d.At. When d.Resume is not nil and
	// the decision leaves none of the approval's message pending, the
	// submission d.Resume makes is queued in the same transaction (see
	// Resume) and returned too: the decision and its resume are stored
	// together or not at all.
	DecideApproval(ctx context.Context, tenant, id string, d Decision) (*Approval, *Submission, error)
	// ExpireApprovals decides every pending approval that expired at at as
	// expired (reason "expired") and returns them. When resume is not nil,
	// it queues, in the same transaction, the submission resume makes for
	// each message the expiry leaves with no approval pending, and returns
	// them.
	ExpireApprovals(ctx context.Context, at time.Time, resume Resume) ([]Approval, []Submission, error)

	// JournalToolResult stores the outcome of an executed tool call,
	// replacing an earlier one of the same key; the engine journals it
	// before the turn's next model step (see ToolResult). Made under the
	// session's lease (WithLease), it is fenced as the transcript writes
	// are: ErrFenced, nothing stored, once the lease was lost.
	JournalToolResult(ctx context.Context, r *ToolResult) error
	// JournaledToolResult returns the journaled outcome of the tool call
	// k or, when there is none, the latest one journaled at position
	// (step, index) of k's request, under another id; ErrNotFound when
	// there is neither. The caller compares its tool and input.
	JournaledToolResult(ctx context.Context, k ToolCallKey, step, index int) (*ToolResult, error)

	// SessionMemory keeps the state of agents' session configuration
	// (sessionmem.go).
	SessionMemory

	// SessionRecords lists, exports and erases whole sessions (erasure.go).
	SessionRecords

	// KillSwitches keeps the operators' kill switches (killswitch.go).
	KillSwitches

	// Decisions keeps every hook's audit record for querying
	// (decisions.go).
	Decisions

	// Close releases the store.
	Close() error
}

// Session is one conversation of one tenant with one agent. Its JSON tags,
// like those of the other types SessionData holds, shape the session
// export (gateway/erasure); "-" marks what the export leaves out.
type Session struct {
	ID        string    `json:"id"`
	Tenant    string    `json:"-"`
	Agent     string    `json:"agent"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
	// LastBody is the extra body of the latest request (TurnContext.body),
	// kept for turns that have no request of their own, such as
	// continuations; nil when never set.
	LastBody json.RawMessage `json:"lastBody,omitempty"`

	// version counts the writes that changed the session or its
	// transcript (PostgreSQL; 0 on SQLite): the transcript cache's entries
	// carry it, and a replica serves an entry only while it is the stored
	// one.
	version int64
}

// Submission is a durable submitMessages request.
type Submission struct {
	ID        string `json:"id"`
	Tenant    string `json:"-"`
	SessionID string `json:"-"`
	Agent     string `json:"-"`
	// IdempotencyKey, when set, is unique per tenant and session.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Status is one of the Status constants.
	Status string `json:"status"`
	// Request is the request as the gateway will replay it.
	Request json.RawMessage `json:"request"`
	// Result is the outcome the gateway recorded when finishing (message
	// id, status, error); nil until then.
	Result json.RawMessage `json:"result,omitempty"`
	// Attempts counts claims, so a value above 1 means a retry after a crash.
	Attempts  int       `json:"attempts"`
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// TurnRecord is the audit of one turn's outcome.
type TurnRecord struct {
	RequestID    string       `json:"requestId"`
	Tenant       string       `json:"-"`
	SessionID    string       `json:"-"`
	Agent        string       `json:"-"`
	Status       string       `json:"status"`
	FinishReason string       `json:"finishReason,omitempty"`
	Error        string       `json:"error,omitempty"`
	Usage        engine.Usage `json:"usage"`
	RuleRevision string       `json:"ruleRevision"`
	StartedAt    time.Time    `json:"startedAt"`
	FinishedAt   time.Time    `json:"finishedAt"`
}

// finalStatus reports whether status ends a submission.
func finalStatus(status string) bool {
	switch status {
	case StatusCompleted, StatusError, StatusAborted, StatusSkipped:
		return true
	}
	return false
}
