package store

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/turngate/turngate/engine"
)

func TestAdmit(t *testing.T) {
	user := func(id string) *engine.UIMessage { m := text(id, "question "+id); return &m }
	tests := []struct {
		name     string
		tenant   string
		agent    string
		session  string
		body     json.RawMessage
		user     *engine.UIMessage
		wantErr  error
		wantSess *Session // ID, Tenant, Agent and LastBody of the answer; nil with wantErr
		// wantBody and wantMsgs are tenant/session as stored afterwards.
		wantBody json.RawMessage
		wantMsgs []engine.UIMessage
	}{
		{
			name: "creates the session, sets the body, appends the message", tenant: "acme", agent: "demo", session: "new",
			body: json.RawMessage(`{"k":1}`), user: user("u1"),
			wantSess: &Session{ID: "new", Tenant: "acme", Agent: "demo", LastBody: json.RawMessage(`{"k":1}`)},
			wantBody: json.RawMessage(`{"k":1}`), wantMsgs: []engine.UIMessage{*user("u1")},
		},
		{
			name: "existing session: appends after its messages", tenant: "acme", agent: "demo", session: "s1",
			body: json.RawMessage(`{"k":2}`), user: user("u2"),
			wantSess: &Session{ID: "s1", Tenant: "acme", Agent: "demo", LastBody: json.RawMessage(`{"k":2}`)},
			wantBody: json.RawMessage(`{"k":2}`), wantMsgs: []engine.UIMessage{*user("u1"), *user("u2")},
		},
		{
			name: "nil body clears it; no user message appends nothing", tenant: "acme", agent: "demo", session: "s1",
			wantSess: &Session{ID: "s1", Tenant: "acme", Agent: "demo"},
			wantMsgs: []engine.UIMessage{*user("u1")},
		},
		{
			name: "same id in another tenant is that tenant's own session", tenant: "other", agent: "demo", session: "s1",
			body: json.RawMessage(`{"o":1}`), user: user("x1"),
			wantSess: &Session{ID: "s1", Tenant: "other", Agent: "demo", LastBody: json.RawMessage(`{"o":1}`)},
			wantBody: json.RawMessage(`{"o":1}`), wantMsgs: []engine.UIMessage{*user("x1")},
		},
		{
			name: "session of another agent: returned, nothing written", tenant: "acme", agent: "other", session: "s1",
			body: json.RawMessage(`{"k":3}`), user: user("u9"),
			wantSess: &Session{ID: "s1", Tenant: "acme", Agent: "demo", LastBody: json.RawMessage(`{"k":0}`)},
			wantBody: json.RawMessage(`{"k":0}`), wantMsgs: []engine.UIMessage{*user("u1")},
		},
		{
			name: "duplicate message id: conflict, body unchanged", tenant: "acme", agent: "demo", session: "s1",
			body: json.RawMessage(`{"k":4}`), user: user("u1"), wantErr: ErrConflict,
			wantBody: json.RawMessage(`{"k":0}`), wantMsgs: []engine.UIMessage{*user("u1")},
		},
		{
			name: "invalid body: nothing written", tenant: "acme", agent: "demo", session: "s1",
			body: json.RawMessage(`{`), user: user("u2"), wantErr: ErrInvalid,
			wantBody: json.RawMessage(`{"k":0}`), wantMsgs: []engine.UIMessage{*user("u1")},
		},
		{
			name: "message without id: nothing written, no session created", tenant: "acme", agent: "demo", session: "new",
			user: &engine.UIMessage{Role: engine.RoleUser}, wantErr: ErrInvalid,
		},
		{name: "empty tenant", agent: "demo", session: "s1", wantErr: ErrInvalid},
		{name: "empty agent", tenant: "acme", session: "s1", wantErr: ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			forEachStore(t, func(t *testing.T, s Store) {
				mustSession(t, s, "acme", "s1")
				if err := s.SetLastBody(ctx, "acme", "s1", json.RawMessage(`{"k":0}`)); err != nil {
					t.Fatal(err)
				}
				if err := s.AppendMessage(ctx, "acme", "s1", *user("u1")); err != nil {
					t.Fatal(err)
				}
				sess, err := s.Admit(ctx, tc.tenant, tc.agent, tc.session, tc.body, tc.user)
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Admit error = %v, want %v", err, tc.wantErr)
				}
				if tc.wantSess != nil {
					got := Session{ID: sess.ID, Tenant: sess.Tenant, Agent: sess.Agent, LastBody: sess.LastBody}
					if !reflect.DeepEqual(got, *tc.wantSess) {
						t.Errorf("Admit = %+v, want %+v", got, *tc.wantSess)
					}
				}
				if tc.tenant == "" || tc.agent == "" {
					return
				}
				stored, err := s.GetSession(ctx, tc.tenant, tc.session)
				if tc.wantMsgs == nil {
					if !errors.Is(err, ErrNotFound) {
						t.Fatalf("GetSession after a failed admission = %v, want ErrNotFound", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if tc.wantSess != nil && (!sess.CreatedAt.Equal(stored.CreatedAt) || !sess.UpdatedAt.Equal(stored.UpdatedAt)) {
					t.Errorf("Admit times created %v updated %v, stored %v %v", sess.CreatedAt, sess.UpdatedAt, stored.CreatedAt, stored.UpdatedAt)
				}
				if string(stored.LastBody) != string(tc.wantBody) {
					t.Errorf("stored last body = %s, want %s", stored.LastBody, tc.wantBody)
				}
				msgs, err := s.Messages(ctx, tc.tenant, tc.session)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(msgs, tc.wantMsgs) {
					t.Errorf("messages = %+v, want %+v", msgs, tc.wantMsgs)
				}
			})
		})
	}
}

func TestAdmitIsIdempotentForTheSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		first, err := s.Admit(ctx, "acme", "demo", "s1", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"u1", "u2"} {
			m := text(id, "hi")
			again, err := s.Admit(ctx, "acme", "demo", "s1", nil, &m)
			if err != nil {
				t.Fatal(err)
			}
			if !again.CreatedAt.Equal(first.CreatedAt) {
				t.Errorf("CreatedAt changed from %v to %v: the session was created again", first.CreatedAt, again.CreatedAt)
			}
		}
		msgs, err := s.Messages(ctx, "acme", "s1")
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 2 || msgs[0].ID != "u1" || msgs[1].ID != "u2" {
			t.Errorf("messages = %+v, want u1, u2", msgs)
		}
	})
}

func BenchmarkAdmit(b *testing.B) {
	benchEachDB(b, func(b *testing.B, db testDB) {
		ctx := context.Background()
		s := open(b, db)
		m := text("", "What is the weather in Paris today, and should I take an umbrella?")
		body := json.RawMessage(`{"locale":"fr"}`)
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			m.ID = strconv.Itoa(i)
			if _, err := s.Admit(ctx, "acme", "demo", "s1", body, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestAdmitRacesTheSessionsCreation: admissions of two agents racing to
// create one session, on two replicas, each find it created exactly once:
// by one agent, whose admissions all store their messages, while the other
// agent's get that agent's session back and store nothing. Both replicas'
// caches then match the database.
func TestAdmitRacesTheSessionsCreation(t *testing.T) {
	forEachDB(t, func(t *testing.T, db testDB) {
		a, b := replicaPair(t, db)
		ctx := context.Background()
		const n = 8
		type admitted struct {
			agent string
			sess  *Session
			err   error
		}
		results := make([]admitted, n)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range n {
			s, agent := a, "demo"
			if i%2 == 1 {
				s, agent = b, "other"
			}
			wg.Go(func() {
				m := text("u"+strconv.Itoa(i), "hi")
				<-start
				sess, err := s.Admit(ctx, "acme", agent, "s1", json.RawMessage(`{"i":`+strconv.Itoa(i)+`}`), &m)
				results[i] = admitted{agent, sess, err}
			})
		}
		close(start)
		wg.Wait()
		owner, err := a.GetSession(ctx, "acme", "s1")
		if err != nil {
			t.Fatal(err)
		}
		var want []string // the ids of the owner's admissions
		for i, r := range results {
			switch {
			case r.err != nil:
				t.Fatalf("admission %d (%s): %v", i, r.agent, r.err)
			case r.sess.Agent != owner.Agent || !r.sess.CreatedAt.Equal(owner.CreatedAt):
				t.Errorf("admission %d (%s) = %+v; want the session of %s created at %v", i, r.agent, r.sess, owner.Agent, owner.CreatedAt)
			case r.agent == owner.Agent:
				want = append(want, "u"+strconv.Itoa(i))
			}
		}
		msgs, err := b.Messages(ctx, "acme", "s1")
		if err != nil {
			t.Fatal(err)
		}
		got := ids(msgs)
		slices.Sort(got)
		if len(want) != n/2 || !slices.Equal(got, want) {
			t.Errorf("messages %v; want those of the %d admissions of %s, %v", got, n/2, owner.Agent, want)
		}
		for _, s := range []Store{a, b} {
			assertCoherent(t, db, s, "acme", "s1")
		}
	})
}
