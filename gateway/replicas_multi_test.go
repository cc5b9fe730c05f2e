package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	"github.com/turngate/turngate/gateway/store"
)

// stepGate is an observer whose BeforeStep, once armed, signals entered and
// waits for open: the turn stands still at its model step number step (the
// first by default), as a replica that is slow or paused. With honourCtx
// it stops waiting when the turn is cancelled; without, it waits as a
// paused process would.
type stepGate struct {
	engine.NopHooks
	armed     atomic.Bool
	honourCtx bool
	step      int
	entered   chan struct{}
	open      chan struct{}
}

func newStepGate(honourCtx bool) *stepGate {
	g := &stepGate{honourCtx: honourCtx, entered: make(chan struct{}, 1), open: make(chan struct{})}
	g.armed.Store(true)
	return g
}

func (g *stepGate) BeforeStep(ctx context.Context, sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
	if !g.armed.Load() || sc.StepNumber != g.step {
		return nil, nil
	}
	select {
	case g.entered <- struct{}{}:
	default:
	}
	if g.honourCtx {
		select {
		case <-g.open:
		case <-ctx.Done():
		}
	} else {
		<-g.open
	}
	return nil, nil
}

// twoReplicas starts two gateways, replica-a and replica-b, on one
// PostgreSQL schema, with observers; mods change both configs.
func twoReplicas(t *testing.T, observers [2]engine.Hooks, mods ...func(*config.Config)) (a, b *testGateway) {
	t.Helper()
	pg := onPostgres(t)
	var gs [2]*testGateway
	for i, id := range []string{"replica-a", "replica-b"} {
		cfg := testConfig(t, "empty")
		pg(cfg)
		cfg.Replica.ID = id
		for _, m := range mods {
			m(cfg)
		}
		gs[i] = startGateway(t, cfg, Options{Observer: observers[i]})
	}
	return gs[0], gs[1]
}

// goRead reads resp's whole body in a goroutine; wait returns it.
func goRead(resp *http.Response) (wait func() []byte) {
	var body []byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer resp.Body.Close()
		body, _ = io.ReadAll(resp.Body)
	}()
	return func() []byte { <-done; return body }
}

// goDo sends a request in a goroutine; wait returns its response.
func goDo(g *testGateway, method, path string, body any) (wait func() *http.Response) {
	ch := make(chan *http.Response, 1)
	go func() { ch <- g.do(method, path, body) }()
	return func() *http.Response { return <-ch }
}

// TestResumeOnOtherReplica: a chat runs on replica a; a client resumes its
// stream on replica b, which relays it through the database from its
// first chunk to its end, byte for byte what a's client got.
func TestResumeOnOtherReplica(t *testing.T) {
	gate := newStepGate(false)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
	// The chat's headers go out with its first chunks, after the gate.
	respA := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hello there"))
	<-gate.entered
	respB := goDo(b, "GET", "/v1/agents/demo/chat/s1/stream", nil)
	// Open the gate once b follows the relayed stream (it registered
	// for its notifications).
	waitFor(t, "b to follow the stream", func() bool { return following(b, "s1") })
	close(gate.open)
	_, gotA := readUIStreamRaw(t, respA())
	_, gotB := readUIStreamRaw(t, respB())
	if !bytes.Equal(gotA, gotB) {
		t.Errorf("stream resumed on b:\n%s\nwant what a sent:\n%s", gotB, gotA)
	}
	if !bytes.HasSuffix(gotB, []byte("data: [DONE]\n\n")) {
		t.Errorf("resumed stream does not end with [DONE]: %q", gotB)
	}
	// After the turn, no stream runs: 204 on either replica.
	waitReleased(t, b, "s1")
	for _, g := range []*testGateway{a, b} {
		resp := g.do("GET", "/v1/agents/demo/chat/s1/stream", nil)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s: resume after the turn: %d, want 204", g.cfg.Replica.ID, resp.StatusCode)
		}
	}
	// The turn's audit record names its replica; /readyz and the rules
	// status name each replica and its revision.
	if !strings.Contains(a.auditLog(), `"replica":"replica-a"`) {
		t.Errorf("a's turn audit does not name replica-a:\n%s", a.auditLog())
	}
	for _, g := range []*testGateway{a, b} {
		var ready struct{ Replica, Revision string }
		g.doJSON("GET", "/readyz", nil, http.StatusOK, &ready)
		var rules struct{ Replica, Revision string }
		g.doJSON("GET", "/v1/admin/rules", nil, http.StatusOK, &rules)
		if ready.Replica != g.cfg.Replica.ID || rules.Replica != g.cfg.Replica.ID || ready.Revision == "" || ready.Revision != rules.Revision {
			t.Errorf("%s: readyz %+v, rules %+v", g.cfg.Replica.ID, ready, rules)
		}
	}
}

// TestResumeAfterMostOfTheStream: a client resumes on replica b a stream
// whose first step (text, a tool call and its output) replica a has sent
// already, nobody following it: a relays it from its first chunk at once,
// before the turn goes on, and b's client gets it whole, byte for byte
// what a's got.
func TestResumeAfterMostOfTheStream(t *testing.T) {
	gate := newStepGate(false)
	gate.step = 1
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
	respA := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "weather in Paris"))
	<-gate.entered
	a.srv.mu.Lock()
	sent := a.srv.active[sessionKey("default", "s1")].buf.Len()
	a.srv.mu.Unlock()
	if sent < 5 {
		t.Fatalf("the first step sent %d frames, want the text, the tool call and its output", sent)
	}
	// b answers once the relay's first batch is there: a relays while its
	// turn stands still.
	respB := b.do("GET", "/v1/agents/demo/chat/s1/stream", nil)
	defer respB.Body.Close()
	if respB.StatusCode != http.StatusOK {
		t.Fatalf("resume: %d", respB.StatusCode)
	}
	var gotB []byte
	buf := make([]byte, 4096)
	for bytes.Count(gotB, []byte("\n\n")) < sent {
		n, err := respB.Body.Read(buf)
		gotB = append(gotB, buf[:n]...)
		if err != nil {
			t.Fatalf("reading the resumed stream before the turn went on: %v\n%s", err, gotB)
		}
	}
	close(gate.open)
	rest, _ := io.ReadAll(respB.Body)
	gotB = append(gotB, rest...)
	_, gotA := readUIStreamRaw(t, respA())
	if !bytes.Equal(gotA, gotB) {
		t.Errorf("stream resumed on b:\n%s\nwant what a sent:\n%s", gotB, gotA)
	}
}

// TestFollowRacesTheTurnsEnd: a client resumes on replica b just as the
// turn on replica a ends, its stream whole and its message stored, but
// its lease not released: either the follow comes first and a relays the
// whole stream before it releases the lease, or the release comes first
// and b answers 204, the message in the transcript.
func TestFollowRacesTheTurnsEnd(t *testing.T) {
	for _, tt := range []struct {
		name   string
		before bool
	}{
		{"follow before the release", true},
		{"follow after the release", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a, b := twoReplicas(t, [2]engine.Hooks{nil, nil})
			respB := make(chan *http.Response, 1)
			resume := func() { respB <- b.do("GET", "/v1/agents/demo/chat/s1/stream", nil) }
			if tt.before {
				var once sync.Once
				a.srv.rep.beforeRelease = func() {
					once.Do(func() {
						go resume()
						for !following(b, "s1") {
							time.Sleep(time.Millisecond)
						}
					})
				}
			}
			_, gotA := readUIStreamRaw(t, a.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hello there")))
			waitReleased(t, b, "s1")
			if !tt.before {
				go resume()
			}
			resp := <-respB
			if !tt.before {
				resp.Body.Close()
				if resp.StatusCode != http.StatusNoContent {
					t.Errorf("resume after the release: %d, want 204", resp.StatusCode)
				}
				if h := b.history("demo", "s1"); len(h) != 2 || h[1].Role != engine.RoleAssistant {
					t.Errorf("transcript on b = %+v, want the turn's message", h)
				}
				return
			}
			_, gotB := readUIStreamRaw(t, resp)
			if !bytes.Equal(gotA, gotB) {
				t.Errorf("stream resumed on b:\n%s\nwant what a sent:\n%s", gotB, gotA)
			}
		})
	}
}

// TestFollowOnlyWhileTheReaderIsThere: a reader on replica b of a turn
// running on replica a marks the turn's lease followed, and so has a relay
// its stream through the database, only while the reader's request lasts.
// One gone before the follow (a load balancer's probe, a client that timed
// out, gone after b found the session) marks nothing and a relays nothing;
// one that leaves while it waits for the stream stops at once.
func TestFollowOnlyWhileTheReaderIsThere(t *testing.T) {
	for _, tt := range []struct {
		name string
		// goneBefore: the request ends before the resume; leaves: it ends
		// while the resume waits for the stream.
		goneBefore, leaves bool
	}{
		{name: "reader there"},
		{name: "reader gone before the follow", goneBefore: true},
		{name: "reader leaves while it waits", leaves: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			gate := newStepGate(true)
			a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
			respA := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hello there"))
			<-gate.entered
			token, live, err := b.srv.rep.relay.LiveStream(context.Background(), "default", "s1")
			if err != nil || !live {
				t.Fatalf("LiveStream of the turn = %v, %v", live, err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.goneBefore {
				cancel()
			}
			var out bufferSink
			type result struct {
				ok  bool
				err error
			}
			resumed := make(chan result, 1)
			go func() {
				ok, err := b.srv.rep.resume(ctx, &out, "default", "s1", nil)
				resumed <- result{ok, err}
			}()
			if !tt.goneBefore {
				waitFor(t, "b to follow the stream", func() bool { return following(b, "s1") })
			}
			if tt.leaves {
				cancel()
			}
			if tt.goneBefore || tt.leaves {
				// The resume ends while the turn stands still.
				select {
				case res := <-resumed:
					resumed <- res
				case <-time.After(10 * time.Second):
					t.Fatal("the resume of a reader that left is still running")
				}
			}
			st, err := b.store.RenewLease(context.Background(), &store.Lease{Tenant: "default", SessionID: "s1", Token: token}, time.Minute)
			if err != nil || st.Followed == tt.goneBefore {
				t.Errorf("the turn's lease = %+v, %v; want followed %v", st, err, !tt.goneBefore)
			}
			close(gate.open)
			_, gotA := readUIStreamRaw(t, respA())
			if res := <-resumed; !res.ok || res.err != nil {
				t.Errorf("resume = %v, %v; want true, nil", res.ok, res.err)
			}
			switch {
			case tt.goneBefore && out.Len() > 0:
				t.Errorf("resume of a reader gone wrote:\n%s", out.Bytes())
			case !tt.goneBefore && !tt.leaves && !bytes.Equal(out.Bytes(), gotA):
				t.Errorf("stream resumed on b:\n%s\nwant what a sent:\n%s", out.Bytes(), gotA)
			}
			waitReleased(t, b, "s1")
			chunks, err := b.srv.rep.relay.ReadChunks(context.Background(), "default", "s1", token, 0, 1)
			if err != nil || (len(chunks) == 0) != tt.goneBefore {
				t.Errorf("a relayed %d batches (%v); want batches relayed: %v", len(chunks), err, !tt.goneBefore)
			}
		})
	}
}

// TestResumeReadersLeaveNoWakers: readers of relayed streams on replica b,
// several of one session at once, are each woken by its notifications and
// each removes its registration however it stops (its stream done, its
// client gone at a write, its request ended while it waits), even when no
// notification of its session comes again: once all have stopped, b keeps
// no waker, and a notification of a session nobody reads adds none.
func TestResumeReadersLeaveNoWakers(t *testing.T) {
	gate := newStepGate(true)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
	var chats [2]func() *http.Response
	for i, session := range []string{"s1", "s2"} {
		chats[i] = goDo(a, "POST", "/v1/agents/demo/chat", chatBody(session, "u1", "hello there"))
		<-gate.entered
	}
	readers := []struct {
		name, session string
		// leaves: the reader's request ends while the turn stands still;
		// gone: its client is gone at its first write.
		leaves, gone bool
		out          bufferSink
		cancel       context.CancelFunc
		done         chan error
	}{
		{name: "first reader of s1", session: "s1"},
		{name: "second reader of s1", session: "s1"},
		{name: "reader of s1 that leaves while it waits", session: "s1", leaves: true},
		{name: "reader of s1 whose client is gone", session: "s1", gone: true},
		{name: "reader of s2 that leaves while it waits", session: "s2", leaves: true},
	}
	for i := range readers {
		rd := &readers[i]
		var ctx context.Context
		ctx, rd.cancel = context.WithCancel(context.Background())
		defer rd.cancel()
		var out streamSink = &rd.out
		if rd.gone {
			out = goneSink{}
		}
		rd.done = make(chan error, 1)
		go func() {
			ok, err := b.srv.rep.resume(ctx, out, "default", rd.session, nil)
			if err == nil && !ok {
				err = errors.New("found no turn")
			}
			rd.done <- err
		}()
	}
	waitFor(t, "b's readers to follow a's turns", func() bool { return readerCount(b, "s1") == 4 && readerCount(b, "s2") == 1 })
	for i := range readers {
		if rd := &readers[i]; rd.leaves {
			rd.cancel()
			if err := <-rd.done; err != nil {
				t.Errorf("%s: %v", rd.name, err)
			}
		}
	}
	// No notification of s2 comes while its turn stands still: its
	// reader's registration went with it all the same.
	if n1, n2 := readerCount(b, "s1"), readerCount(b, "s2"); n1 != 3 || n2 != 0 {
		t.Errorf("readers registered after two left: s1 %d, s2 %d; want 3, 0", n1, n2)
	}
	close(gate.open)
	_, want := readUIStreamRaw(t, chats[0]())
	readUIStreamRaw(t, chats[1]())
	for i := range readers {
		rd := &readers[i]
		if !rd.leaves {
			if err := <-rd.done; err != nil {
				t.Errorf("%s: %v", rd.name, err)
			}
		}
		if !rd.leaves && !rd.gone && !bytes.Equal(rd.out.Bytes(), want) {
			t.Errorf("%s read:\n%s\nwant what a sent:\n%s", rd.name, rd.out.Bytes(), want)
		}
	}
	b.srv.rep.notified(store.Notification{Channel: store.ChannelStream, Tenant: "default", SessionID: "s1"})
	r := b.srv.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.wakers) != 0 {
		t.Errorf("wakers left after every reader stopped: %v", r.wakers)
	}
}

// TestRelayNotificationWakesEachReader: one stream notification wakes each
// reader of the session on this replica, the other sessions' none; one
// that finds a reader's wake-up still pending does not block.
func TestRelayNotificationWakesEachReader(t *testing.T) {
	r := newReplicas(nil, nil)
	first, stopFirst := r.watch(sessionKey("default", "s1"))
	defer stopFirst()
	second, stopSecond := r.watch(sessionKey("default", "s1"))
	defer stopSecond()
	other, stopOther := r.watch(sessionKey("default", "s2"))
	defer stopOther()
	for range 2 { // the second finds the wake-ups pending
		r.notified(store.Notification{Channel: store.ChannelStream, Tenant: "default", SessionID: "s1"})
	}
	for _, tt := range []struct {
		name  string
		wake  <-chan struct{}
		woken bool
	}{
		{"first reader of s1", first, true},
		{"second reader of s1", second, true},
		{"reader of s2", other, false},
	} {
		select {
		case <-tt.wake:
			if !tt.woken {
				t.Errorf("%s: woken by a notification of s1", tt.name)
			}
		default:
			if tt.woken {
				t.Errorf("%s: not woken", tt.name)
			}
		}
	}
}

// goneSink is the streamSink of a client gone before the first write.
type goneSink struct{}

func (goneSink) write([]byte) error { return errors.New("the client went away") }

func (goneSink) flush() {}

// bufferSink is a streamSink that keeps what is written to it.
type bufferSink struct{ bytes.Buffer }

func (s *bufferSink) write(frames []byte) error {
	s.Write(frames)
	return nil
}

func (s *bufferSink) flush() {}

// following reports whether g has a reader waiting on the relayed stream
// of the anonymous tenant's session.
func following(g *testGateway, session string) bool {
	return readerCount(g, session) > 0
}

// readerCount is how many readers g has registered for the notifications
// of the relayed stream of the anonymous tenant's session.
func readerCount(g *testGateway, session string) int {
	r := g.srv.rep
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.wakers[sessionKey("default", session)])
}

// waitReleased waits until the lease of the anonymous tenant's session is
// released: the replica running its turn releases it just after the
// stream's end.
func waitReleased(t *testing.T, g *testGateway, session string) {
	t.Helper()
	for {
		_, live, err := g.srv.rep.relay.LiveStream(context.Background(), "default", session)
		if err != nil {
			t.Fatal(err)
		}
		if !live {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// TestCancelFromOtherReplica: a cancel sent to replica b reaches the turn
// running on replica a, which ends aborted.
func TestCancelFromOtherReplica(t *testing.T) {
	gate := newStepGate(true)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
	respA := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hello there"))
	<-gate.entered
	var out map[string]bool
	b.doJSON("POST", "/v1/agents/demo/sessions/s1/cancel", nil, http.StatusOK, &out)
	if !out["cancelled"] {
		t.Error("b found no running turn to cancel")
	}
	got := goRead(respA())()
	if !bytes.Contains(got, []byte(`"type":"abort"`)) {
		t.Errorf("a's stream after the cancel from b:\n%s\nwant an abort", got)
	}
	recs, err := b.store.Turns(context.Background(), "default", "s1")
	if err != nil || len(recs) != 1 || recs[0].Status != engine.StatusAborted {
		t.Errorf("turn records = %+v, %v; want one aborted", recs, err)
	}
	waitReleased(t, b, "s1")
	b.doJSON("POST", "/v1/agents/demo/sessions/s1/cancel", nil, http.StatusOK, &out)
	if out["cancelled"] {
		t.Error("a second cancel found a turn running")
	}
}

// TestFencedReplicaTurn: replica a's turn stands still (a paused process:
// its lease renewals stop); its lease expires and replica b runs the
// session's next turn; when a's turn goes on, its writes are refused, it
// ends as an error and the transcript holds b's turn only.
func TestFencedReplicaTurn(t *testing.T) {
	gate := newStepGate(false)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil}, func(cfg *config.Config) { cfg.Replica.LeaseTTL = time.Second })
	respA := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "first"))
	<-gate.entered
	a.srv.rep.pauseHeartbeats.Store(true)
	// b waits for a's lease to expire, then runs.
	chunks := readUIStream(t, b.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u2", "second")))
	assistantB := chunks[0].str("messageId")
	close(gate.open)
	gotA := goRead(respA())()
	if !bytes.Contains(gotA, []byte(errFencedText)) {
		t.Errorf("a's stream does not end with the fenced error:\n%s", gotA)
	}
	var ids []string
	for _, m := range b.history("demo", "s1") {
		ids = append(ids, m.Role+":"+m.ID)
	}
	if want := []string{"user:u1", "user:u2", "assistant:" + assistantB}; strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("transcript = %v, want %v (a's fenced turn stored nothing)", ids, want)
	}
	recs, err := b.store.Turns(context.Background(), "default", "s1")
	if err != nil || len(recs) != 1 || recs[0].Status != engine.StatusCompleted {
		t.Errorf("turn records = %+v, %v; want b's only", recs, err)
	}
}

// TestSubmissionsOnTwoReplicas: submissions accepted by either replica are
// each run once, by the workers of both, in order per session.
func TestSubmissionsOnTwoReplicas(t *testing.T) {
	a, b := twoReplicas(t, [2]engine.Hooks{nil, nil})
	const sessions, per = 4, 5
	type accepted struct{ session, id string }
	var subs []accepted
	for i := range per {
		for s := range sessions {
			g := []*testGateway{a, b}[(i+s)%2]
			session := fmt.Sprint("s", s)
			var sub submissionResponse
			g.doJSON("POST", "/v1/agents/demo/sessions/"+session+"/messages",
				map[string]any{"text": fmt.Sprint("message ", i), "async": true}, http.StatusAccepted, &sub)
			subs = append(subs, accepted{session, sub.SubmissionID})
		}
	}
	for _, s := range subs {
		var sub submissionResponse
		for sub.Status != store.StatusCompleted {
			b.doJSON("GET", "/v1/agents/demo/sessions/"+s.session+"/submissions/"+s.id, nil, http.StatusOK, &sub)
			if sub.Status == store.StatusError || sub.Status == store.StatusAborted {
				t.Fatalf("submission %s: %+v", s.id, sub)
			}
			if sub.Status != store.StatusCompleted {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if sub.Attempts != 1 {
			t.Errorf("submission %s ran %d times", s.id, sub.Attempts)
		}
		// Its result names the replica whose turn (audit record) ran it.
		ranOn := "replica-b"
		if strings.Contains(a.auditLog(), `"replica":"replica-a","requestId":"sub_`+s.id+`"`) {
			ranOn = "replica-a"
		}
		if got := resultReplica(t, sub.Result); got != ranOn {
			t.Errorf("submission %s ran on %s, its result names %q", s.id, ranOn, got)
		}
	}
	for s := range sessions {
		msgs := a.history("demo", fmt.Sprint("s", s))
		var roles []string
		for _, m := range msgs {
			roles = append(roles, m.Role)
		}
		want := strings.TrimSuffix(strings.Repeat("user assistant ", per), " ")
		if strings.Join(roles, " ") != want {
			t.Errorf("session s%d: roles %v, want %s", s, roles, want)
		}
		for i := 0; i+1 < len(msgs); i += 2 {
			if textOf(msgs[i]) != fmt.Sprint("message ", i/2) {
				t.Errorf("session s%d: message %d is %q, out of order", s, i, textOf(msgs[i]))
			}
		}
	}
}

// TestWSResumeOnOtherReplica: a turn started over HTTP or WebSocket runs on
// replica a; WebSocket resumes on replica b replay it through the database
// from its first chunk (or from lastSequence + 1) to its end, the very
// chunks a's own client got; one beyond the response's end is refused, and
// a resume when nothing runs answers no-active.
func TestWSResumeOnOtherReplica(t *testing.T) {
	for _, over := range []string{"http", "websocket"} {
		t.Run(over, func(t *testing.T) {
			gate := newChunkGate()
			a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
			var own func() []chunk // what a's client got
			if over == "http" {
				resp := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hello there"))
				own = func() []chunk { return readUIStream(t, resp()) }
			} else {
				ca := a.dialWS(t, "demo", nil)
				ca.write(sendFrame("send", "s1", "u1", "hello there", nil))
				own = func() []chunk { return ca.turn("send", nil) }
			}
			<-gate.entered
			cb := b.dialWS(t, "demo", nil)
			cb.write(resumeFrame("resume", "s1", nil))
			cb.write(map[string]any{"type": "resume", "requestId": "from2", "id": "s1", "lastSequence": 1})
			cb.write(map[string]any{"type": "resume", "requestId": "beyond", "id": "s1", "lastSequence": 1000})
			// Each resume counts as a stream once it has read the relayed
			// stream's first batch, while the turn stands still.
			waitFor(t, "b's three resumes to follow a's turn", func() bool {
				return strings.Contains(b.metricsText(), "turngate_active_streams 3\n")
			})
			close(gate.open)
			want := own()
			replay := cb.collect("resume")
			if replay.end != "end" || !replay.started {
				t.Fatalf("resume on b ended with %q (started %v): %v", replay.end, replay.started, replay.err)
			}
			if got, want := mustJSON(replay.chunks), mustJSON(want); got != want {
				t.Errorf("resumed on b:\n%s\nwant what a's client got:\n%s", got, want)
			}
			from2 := cb.collectFrom("from2", 2)
			if from2.end != "end" || !from2.started {
				t.Fatalf("resume on b from lastSequence 1 ended with %q (started %v): %v", from2.end, from2.started, from2.err)
			}
			if got, want := mustJSON(from2.chunks), mustJSON(want[2:]); got != want {
				t.Errorf("resumed on b from lastSequence 1:\n%s\nwant\n%s", got, want)
			}
			if r := cb.collect("beyond"); r.end != "error" || r.started || r.err["code"] != CodeInvalidRequest {
				t.Errorf("resume beyond the response: %q (started %v) %v, want an invalid_request error", r.end, r.started, r.err)
			}
			waitReleased(t, b, "s1")
			cb.write(resumeFrame("again", "s1", nil))
			if r := cb.collect("again"); r.end != "no-active" {
				t.Errorf("resume on b after the turn: %q %v, want no-active", r.end, r.err)
			}
		})
	}
}

// chunkGate is an observer that holds a turn at its model's second stream
// part until open (or the turn's end), signalling entered: the first
// part's chunks are then in its stream.
type chunkGate struct {
	engine.NopHooks
	parts   atomic.Int32
	entered chan struct{}
	open    chan struct{}
}

func newChunkGate() *chunkGate {
	return &chunkGate{entered: make(chan struct{}), open: make(chan struct{})}
}

func (g *chunkGate) OnChunk(ctx context.Context, _ *engine.ChunkContext) {
	if g.parts.Add(1) != 2 {
		return
	}
	close(g.entered)
	select {
	case <-g.open:
	case <-ctx.Done():
	}
}

// TestWSAbortOfResumeOnOtherReplica: an abort of a WebSocket resume on
// replica b cancels the turn it follows on replica a, as an abort of an
// in-process resume does: the turn ends aborted and the replay ends.
func TestWSAbortOfResumeOnOtherReplica(t *testing.T) {
	gate := newStepGate(true)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, nil})
	respA := goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hello there"))
	<-gate.entered
	cb := b.dialWS(t, "demo", nil)
	cb.write(resumeFrame("resume", "s1", nil))
	waitFor(t, "b to follow the stream", func() bool { return following(b, "s1") })
	cb.write(map[string]any{"type": "abort", "requestId": "resume"})
	got := goRead(respA())()
	if !bytes.Contains(got, []byte(`"type":"abort"`)) {
		t.Errorf("a's stream after the abort on b:\n%s\nwant an abort", got)
	}
	waitReleased(t, b, "s1")
	recs, err := b.store.Turns(context.Background(), "default", "s1")
	if err != nil || len(recs) != 1 || recs[0].Status != engine.StatusAborted {
		t.Errorf("turn records = %+v, %v; want one aborted", recs, err)
	}
}

// TestFencedJournal: a submission's turn on one replica stands still before
// its tool call (a paused process: its lease renewals stop); its lease
// expires and the other replica runs the session's next turn. When the
// paused turn goes on, its tool runs but the journal refuses the outcome
// (the new holder could re-run the submission and reuse it): the turn ends
// at once as a fenced error, journaling and storing nothing.
func TestFencedJournal(t *testing.T) {
	gate := newStepGate(false)
	a, b := twoReplicas(t, [2]engine.Hooks{gate, gate}, func(cfg *config.Config) { cfg.Replica.LeaseTTL = time.Second })
	var sub submissionResponse
	a.doJSON("POST", "/v1/agents/demo/sessions/s1/messages", map[string]any{"text": "weather in Paris", "async": true}, http.StatusAccepted, &sub)
	<-gate.entered
	gate.armed.Store(false)
	// Either replica's worker may have claimed it.
	runner, other := a, b
	if runningHere(b, "s1") {
		runner, other = b, a
	}
	runner.srv.rep.pauseHeartbeats.Store(true)
	chunks := readUIStream(t, other.do("POST", "/v1/agents/demo/chat", chatBody("s1", "u2", "hello there")))
	close(gate.open)
	for sub.Status == store.StatusQueued || sub.Status == store.StatusRunning {
		time.Sleep(5 * time.Millisecond)
		other.doJSON("GET", "/v1/agents/demo/sessions/s1/submissions/"+sub.SubmissionID, nil, http.StatusOK, &sub)
	}
	if sub.Status != store.StatusError || !bytes.Contains(sub.Result, []byte(errFencedText)) {
		t.Errorf("submission %s: %s, want an error naming the lost lease", sub.Status, sub.Result)
	}
	if got := resultReplica(t, sub.Result); got != runner.cfg.Replica.ID {
		t.Errorf("the fenced submission's result names %q, want %s, which ran it", got, runner.cfg.Replica.ID)
	}
	if r, err := other.store.JournaledToolResult(context.Background(), store.ToolCallKey{Tenant: "default", SessionID: "s1",
		RequestID: "sub_" + sub.SubmissionID, ToolCallID: "none"}, 0, 0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("journaled under the lost lease: %+v, %v", r, err)
	}
	var roles []string
	for _, m := range other.history("demo", "s1") {
		if m.Role == engine.RoleUser {
			roles = append(roles, "user:"+textOf(m))
		} else {
			roles = append(roles, m.Role+":"+m.ID)
		}
	}
	want := []string{"user:weather in Paris", "user:hello there", "assistant:" + chunks[0].str("messageId")}
	if strings.Join(roles, "|") != strings.Join(want, "|") {
		t.Errorf("transcript = %q, want %q (the fenced turn stored nothing)", roles, want)
	}
	// The turn ended after its tool call (its beforeToolCall is in the
	// audit), without a second model step on the tool's outcome.
	if audit := runner.auditLog(); !strings.Contains(audit, `"hook":"beforeToolCall"`) || strings.Contains(audit, `"stepNumber":1`) {
		t.Errorf("the fenced turn's audit does not show one step that called the tool:\n%s", audit)
	}
}

// resultReplica returns the replica a submission's result names.
func resultReplica(t *testing.T, result json.RawMessage) string {
	t.Helper()
	var r struct{ Replica string }
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("result %s: %v", result, err)
	}
	return r.Replica
}

// runningHere reports whether g runs the turn of the anonymous tenant's
// session.
func runningHere(g *testGateway, session string) bool {
	g.srv.mu.Lock()
	defer g.srv.mu.Unlock()
	return g.srv.active[sessionKey("default", session)] != nil
}

// TestWSAbortOfResumeRacingTheTurnsEnd: a WebSocket resume on replica b
// replays a turn of replica a; the turn ends and the session's next turn
// starts on a before the resume's abort is handled (an abort racing the
// turn's end). The abort must not cancel that next turn: it cancels the
// turn the resume was reading, by its lease token, not the session's.
func TestWSAbortOfResumeRacingTheTurnsEnd(t *testing.T) {
	gate, a, b, respA, r, w := relayedResumeSetup(t)
	resumed := make(chan error, 1)
	go func() {
		_, err := w.resumeRelayed(r, &wsFrame{SessionID: "s1"}, "default")
		resumed <- err
	}()
	waitFor(t, "b to follow the stream", func() bool { return following(b, "s1") })
	gate.open <- struct{}{}
	goRead(respA())()
	if err := <-resumed; err != nil {
		t.Fatalf("resume on b: %v", err)
	}
	waitReleased(t, b, "s1")

	// The session's next turn, on a.
	respA = goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u2", "again"))
	<-gate.entered
	r.abort()
	token, live, err := b.srv.rep.relay.LiveStream(context.Background(), "default", "s1")
	if err != nil || !live {
		t.Fatalf("LiveStream of the next turn = %v, %v", live, err)
	}
	st, err := b.store.RenewLease(context.Background(), &store.Lease{Tenant: "default", SessionID: "s1", Token: token}, time.Minute)
	if err != nil || st.Cancelled {
		t.Errorf("the next turn's lease after the resume's abort = %+v, %v; want not cancelled", st, err)
	}
	close(gate.open)
	if got := goRead(respA())(); bytes.Contains(got, []byte(`"type":"abort"`)) {
		t.Errorf("the next turn's stream:\n%s\nwant no abort", got)
	}
}

// TestWSAbortBeforeResumeFindsTheTurn: a WebSocket resume on replica b
// aborted before it has found the turn it resumes, running on replica a,
// still cancels that turn, as an abort of an in-process resume does; its
// reader gone, it does not follow the turn's stream, so a relays nothing.
func TestWSAbortBeforeResumeFindsTheTurn(t *testing.T) {
	_, _, b, respA, r, w := relayedResumeSetup(t)
	token, live, err := b.srv.rep.relay.LiveStream(context.Background(), "default", "s1")
	if err != nil || !live {
		t.Fatalf("LiveStream of the turn = %v, %v", live, err)
	}
	r.abort()
	if ok, err := w.resumeRelayed(r, &wsFrame{SessionID: "s1"}, "default"); !ok || err != nil {
		t.Errorf("aborted resume = %v, %v; want true, nil", ok, err)
	}
	// The gate stays shut: the turn ends when a hears of the cancel.
	if got := goRead(respA())(); !bytes.Contains(got, []byte(`"type":"abort"`)) {
		t.Errorf("a's stream after the abort on b:\n%s\nwant an abort", got)
	}
	waitReleased(t, b, "s1")
	recs, err := b.store.Turns(context.Background(), "default", "s1")
	if err != nil || len(recs) != 1 || recs[0].Status != engine.StatusAborted {
		t.Errorf("turn records = %+v, %v; want one aborted", recs, err)
	}
	if chunks, err := b.srv.rep.relay.ReadChunks(context.Background(), "default", "s1", token, 0, 1); err != nil || len(chunks) > 0 {
		t.Errorf("a relayed %d batches (%v) for the aborted resume; want none", len(chunks), err)
	}
}

// relayedResumeSetup starts two replicas and a turn of session s1 on a,
// standing still at its first step (until gate opens or it is cancelled),
// and returns a resume request r of a WebSocket connection w on b, for the
// test to run and abort as the connection would.
func relayedResumeSetup(t *testing.T) (gate *stepGate, a, b *testGateway, respA func() *http.Response, r *wsRequest, w *wsConn) {
	t.Helper()
	gate = newStepGate(true)
	a, b = twoReplicas(t, [2]engine.Hooks{gate, nil})
	respA = goDo(a, "POST", "/v1/agents/demo/chat", chatBody("s1", "u1", "hello there"))
	<-gate.entered
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r = &wsRequest{id: "resume", ctx: ctx, cancel: cancel}
	w = &wsConn{s: b.srv, out: make(chan []byte, 1024)}
	return gate, a, b, respA, r, w
}
