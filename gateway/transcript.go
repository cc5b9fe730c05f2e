package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/policy"
	"github.com/turngate/turngate/policy/ruleset"
)

// transcript is a session's stored messages, loaded under the session's
// turn lock. Its methods change the store and the local copy together; an
// ephemeral transcript (OpenAI-compatible turns) has no store.
type transcript struct {
	st       store.Store
	tenant   string
	session  string
	messages []engine.UIMessage
	// principal is the caller the turn runs for.
	principal engine.Principal
	// answer applies a chat client's approval answers (Server.answerPlan).
	answer func(ctx context.Context, sent engine.UIMessage, tx *transcript) (*plan, error)
	// pending, when not nil, is the admission not stored yet: the first
	// write stores it (see admit).
	pending *admission
	// persist returns a message as the store must keep it: the
	// beforePersist rules' masking applied (Server.persister). The local
	// copy, what the running turn's model sees, keeps the original. Nil
	// stores messages as they are.
	persist func(ctx context.Context, m engine.UIMessage) (engine.UIMessage, error)
}

// stored returns m as the store must keep it.
func (t *transcript) stored(ctx context.Context, m engine.UIMessage) (engine.UIMessage, error) {
	if t.persist == nil {
		return m, nil
	}
	return t.persist(ctx, m)
}

// admission is what admitting a turn stores before its first change to the
// transcript: the session, created for agent when absent, and the request's
// body as the session's last body.
type admission struct {
	agent string
	body  json.RawMessage
}

// admit stores the pending admission, if any, with user appended in the
// same transaction when it is not nil. A session that turns out to belong
// to another agent is not found.
func (t *transcript) admit(ctx context.Context, user *engine.UIMessage) error {
	if t.pending == nil {
		return nil
	}
	if user != nil {
		m, err := t.stored(ctx, *user)
		if err != nil {
			return err
		}
		user = &m
	}
	var sess *store.Session
	err := store.RetryWrite(ctx, false, func() (err error) {
		sess, err = t.st.Admit(ctx, t.tenant, t.pending.agent, t.session, t.pending.body, user)
		return err
	})
	if err != nil {
		return err
	}
	if sess.Agent != t.pending.agent {
		return errSessionNotFound
	}
	t.pending = nil
	return nil
}

// last returns the last message, or nil.
func (t *transcript) last() *engine.UIMessage {
	if len(t.messages) == 0 {
		return nil
	}
	return &t.messages[len(t.messages)-1]
}

// index returns the position of message id, or -1.
func (t *transcript) index(id string) int {
	for i := range t.messages {
		if t.messages[i].ID == id {
			return i
		}
	}
	return -1
}

func (t *transcript) append(ctx context.Context, m engine.UIMessage) error {
	if t.st != nil {
		var err error
		if t.pending != nil {
			err = t.admit(ctx, &m)
		} else {
			var sm engine.UIMessage
			if sm, err = t.stored(ctx, m); err == nil {
				err = store.RetryWrite(ctx, false, func() error { return t.st.AppendMessage(ctx, t.tenant, t.session, sm) })
			}
		}
		if err != nil {
			return err
		}
	}
	t.messages = append(t.messages, m)
	return nil
}

// upsert replaces the message with m.ID in place, or appends m.
func (t *transcript) upsert(ctx context.Context, m engine.UIMessage) error {
	if t.st != nil {
		if err := t.admit(ctx, nil); err != nil {
			return err
		}
		sm, err := t.stored(ctx, m)
		if err != nil {
			return err
		}
		if err := store.RetryWrite(ctx, true, func() error { return t.st.UpsertMessage(ctx, t.tenant, t.session, sm) }); err != nil {
			return err
		}
	}
	if i := t.index(m.ID); i >= 0 {
		t.messages[i] = m
	} else {
		t.messages = append(t.messages, m)
	}
	return nil
}

// truncateAfter drops every message after id, and id itself when inclusive.
func (t *transcript) truncateAfter(ctx context.Context, id string, inclusive bool) error {
	i := t.index(id)
	if i < 0 {
		return store.ErrNotFound
	}
	if t.st != nil {
		if err := t.admit(ctx, nil); err != nil {
			return err
		}
		if err := t.st.TruncateAfter(ctx, t.tenant, t.session, id, inclusive); err != nil {
			return err
		}
	}
	if inclusive {
		t.messages = t.messages[:i]
	} else {
		t.messages = t.messages[:i+1]
	}
	return nil
}

// replaceLast replaces the last message in the local copy only; the turn's
// result persists it.
func (t *transcript) replaceLast(m engine.UIMessage) {
	t.messages[len(t.messages)-1] = m
}

// errPersistRules marks a message the beforePersist rules failed on: it is
// not stored, and the request or turn fails (whatever the failure
// policy: storing it unmasked would be the leak the rules prevent).
var errPersistRules = errors.New("beforePersist rules failed")

// errPersistRulesText is what the client is told.
const errPersistRulesText = "the beforePersist rules failed on this message, so it was not stored; the decision record says why"

// persister returns the function that gives a message of the turn in as
// the store must keep it: masked by the beforePersist rules of the turn's
// revision, each evaluation recorded. Its error is a 500
// persist_rules_failed that wraps errPersistRules.
func (s *Server) persister(in *turnInput) func(ctx context.Context, m engine.UIMessage) (engine.UIMessage, error) {
	return func(ctx context.Context, m engine.UIMessage) (engine.UIMessage, error) {
		id := &engine.Identity{RequestID: in.requestID, SessionID: in.sessionID, Agent: in.agent.name,
			Principal: in.principal, EntryPath: in.entry}
		if in.live != nil {
			id.Deadline, _ = in.live.Deadline()
			id.Aborted = in.live.Err() != nil
		}
		out, err := in.rev.BeforePersist(ctx, s.recorder, id, m)
		if err != nil {
			return engine.UIMessage{}, &persistError{err: err}
		}
		return out, nil
	}
}

// warnPersistInputs warns, once per revision (at its first turn), when
// rev has beforePersist rules while decision records carry their inputs:
// beforePersist masks what the store keeps of the messages, not the inputs
// the other hooks' records hold (the JSONL audit log and the decision
// store), which are the running turn's, unmasked.
func (s *Server) warnPersistInputs(rev *ruleset.Revision) {
	old := s.persistChecked.Load()
	if old == rev || !s.persistChecked.CompareAndSwap(old, rev) {
		return
	}
	if r, ok := s.recorder.(policy.InputRecorder); (!ok || r.RecordsInput()) && rev.HasBeforePersist() {
		s.log.Warn("beforePersist rules mask what the store keeps, but audit.recordInput is on: the other hooks' decision records "+
			"(the audit log and the decision store) hold the running turn's input unmasked; set audit.recordInput: false, "+
			"or list those fields in audit.redact", "revision", rev.ID())
	}
}

// persistError is a beforePersist failure: a 500 persist_rules_failed to
// the client, the rule's error in the log only.
type persistError struct{ err error }

func (e *persistError) Error() string { return fmt.Sprintf("%v: %v", errPersistRules, e.err) }

func (e *persistError) Unwrap() []error {
	return []error{errPersistRules, &apiError{Status: http.StatusInternalServerError, Code: CodePersistRulesFailed, Message: errPersistRulesText}}
}
