package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The chaos test's size: 64 sessions, each running operations with a pause
// of 1–3 s between them for chaosDuration, while a replica is killed every
// few seconds. About 60–90 s on 2 busy cores.
const (
	chaosReplicas = 3
	chaosSessions = 64
	chaosDuration = 45 * time.Second
	// chaosKillEvery is the mean pause between two SIGKILLs.
	chaosKillEvery = 4 * time.Second
	// chaosStreamTimeout bounds reading one stream: a stream still open
	// after it has hung.
	chaosStreamTimeout = 60 * time.Second
	// chaosDrainTimeout bounds waiting for the submissions to finish once
	// the chaos has stopped.
	chaosDrainTimeout = 90 * time.Second
	// chaosMissMargin is how many chunks (15 ms apart) a turn must still
	// have had to stream for a replica's "no turn runs" to be wrong: a
	// margin for the client reading its stream late on a busy machine.
	chaosMissMargin = 20
	// chaosCancelDelay bounds how long a turn may stream on after another
	// replica answered its cancel: a renewal of its lease (leaseTtl/3,
	// 0.67 s here) and slack for a busy machine.
	chaosCancelDelay = 2 * time.Second
)

// replicaSet is the chaos test's replicas and the URLs clients may use: a
// killed replica has none until it is up again.
type replicaSet struct {
	mu   sync.Mutex
	gws  []*gateway
	urls []string
}

// pick returns the URL of a random live replica other than those in not
// (any live one if there is no other), and its index.
func (rs *replicaSet) pick(not ...int) (int, string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	var live, other []int
	for i, u := range rs.urls {
		if u == "" {
			continue
		}
		live = append(live, i)
		if !slices.Contains(not, i) {
			other = append(other, i)
		}
	}
	if len(other) == 0 {
		other = live
	}
	if len(other) == 0 {
		return -1, ""
	}
	i := other[rand.IntN(len(other))]
	return i, rs.urls[i]
}

func (rs *replicaSet) set(i int, url string) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.urls[i] = url
}

// tallyBackend is the chaos test's HTTP tool: it executes each call once
// per Idempotency-Key, as a backend that deduplicates by it does, and
// records every request.
type tallyBackend struct {
	URL string
	mu  sync.Mutex
	// requests counts the requests per Idempotency-Key.
	requests map[string]int
	// keys are the keys seen per request id and tool call id.
	keys map[[2]string][]string
	// missing counts requests without a key.
	missing int
}

func startTallyBackend(t *testing.T) *tallyBackend {
	b := &tallyBackend{requests: map[string]int{}, keys: map[[2]string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		call := [2]string{r.Header.Get("X-Turngate-Request-Id"), r.Header.Get("X-Turngate-Tool-Call-Id")}
		b.mu.Lock()
		if key == "" {
			b.missing++
		}
		b.requests[key]++
		if !slices.Contains(b.keys[call], key) {
			b.keys[call] = append(b.keys[call], key)
		}
		b.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"counted": call[1]})
	}))
	t.Cleanup(srv.Close)
	b.URL = srv.URL
	return b
}

// chaosSession is what one client did with one session, for the checks
// at the end.
type chaosSession struct {
	id string
	// acked are the user message ids the gateway accepted: a chat answered
	// 200, a submission 202 (or 200 for its repeated Idempotency-Key).
	acked []string
	// answered are the assistant message ids of chat streams that
	// finished normally.
	answered []string
	// subs are the accepted submissions' ids.
	subs []string
	// problems are violations seen while running.
	problems []string
	// resumes counts the resumed streams read, complete the complete
	// ones.
	resumes, complete int
	// cancels counts the cancels another replica answered cancelled: true,
	// aborted those whose stream ended in abort.
	cancels, aborted int
}

func (s *chaosSession) fail(format string, args ...any) {
	s.problems = append(s.problems, fmt.Sprintf(format, args...))
}

// chaosClient sends one session's requests to random replicas.
type chaosClient struct {
	rs   *replicaSet
	http *http.Client
	s    *chaosSession
	mu   sync.Mutex // guards s against the resume goroutines
}

// post sends a JSON request to url and returns the response (the caller
// closes it).
func (c *chaosClient) send(ctx context.Context, method, url string, body any, header ...string) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return c.http.Do(req)
}

// readStream reads a UI message stream to its end and returns it and
// whether it ended normally ([DONE] after finish, no abort or error).
func readStream(body io.Reader) (*uiStream, bool, error) {
	s, err := readUIStream(body)
	if err != nil {
		return s, false, err
	}
	types := s.types()
	ok := slices.Contains(types, "finish") && !slices.Contains(types, "abort") && !slices.Contains(types, "error")
	return s, ok, nil
}

// chat sends a new user message to a random replica's chat endpoint,
// sometimes resuming its stream on another replica or cancelling it from
// another, and reads the stream.
func (c *chaosClient) chat(msgID string) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosStreamTimeout)
	defer cancel()
	body := userChat(c.s.id, msgID, "tally "+msgID, nil)
	var resp *http.Response
	var at int
	for range 3 { // a refused connection (a killed replica) is retried elsewhere, same message id
		var url string
		at, url = c.rs.pick()
		if url == "" {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		var err error
		if resp, err = c.send(ctx, http.MethodPost, url+"/v1/agents/demo/chat", body); err == nil {
			break
		}
		resp = nil
	}
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests {
		return
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		c.fail("chat %s: status %d: %s", msgID, resp.StatusCode, data)
		return
	}
	c.mu.Lock()
	c.s.acked = append(c.s.acked, msgID)
	c.mu.Unlock()

	r := newUIStreamReader(resp.Body)
	if _, err := r.until("start"); err != nil {
		return // the replica died before the turn started streaming
	}
	// read counts the original stream's chunks as they arrive, so that an
	// answer from another replica can be placed in the turn's course.
	var (
		wg        sync.WaitGroup
		read      atomic.Int64
		resumed   *uiStream
		resumedOK bool
		// missedAt is how many chunks the original had read when another
		// replica answered that no turn runs (resume 204, cancel false);
		// -1 when none did.
		missedAt atomic.Int64
		// answeredAt is how many chunks the original had read when
		// another replica answered a resume with a stream.
		answeredAt atomic.Int64
		missed     string
		cancelled  bool
		// cancelledAt is when another replica answered the cancel.
		cancelledAt time.Time
	)
	missedAt.Store(-1)
	read.Store(int64(len(r.Chunks)))
	switch x := rand.Float64(); {
	case x < 0.4:
		missed = "resume answered 204"
		wg.Go(func() {
			var none bool
			resumed, resumedOK, none = c.resume(at, func() { answeredAt.Store(read.Load()) })
			if none {
				missedAt.Store(read.Load())
			}
		})
	case x < 0.55:
		if _, err := r.until("text-delta"); err == nil {
			read.Store(int64(len(r.Chunks)))
			missed = "cancel answered cancelled: false"
			// The cancel runs beside the reading, as the resume does: the
			// turn streams on while another replica answers, so what
			// counts is how far the original had read when the answer
			// came, not when the request left.
			wg.Go(func() {
				var answered bool
				if cancelled, answered = c.cancel(ctx, at); answered && !cancelled {
					missedAt.Store(read.Load())
				}
				cancelledAt = time.Now()
			})
		}
	}
	for {
		_, err := r.next()
		read.Store(int64(len(r.Chunks)))
		if err != nil {
			break
		}
	}
	s, err := r.finish()
	wg.Wait()
	if err != nil {
		return // cut by a kill
	}
	// Another replica that said no turn runs while this one still had
	// chaosMissMargin chunks to stream did not see the running turn.
	if at := missedAt.Load(); at >= 0 && int64(len(s.Chunks))-at > chaosMissMargin {
		c.fail("chat %s: %s from another replica with %d of the turn's %d chunks still to come", msgID, missed, int64(len(s.Chunks))-at, len(s.Chunks))
	}
	types := s.types()
	normal := slices.Contains(types, "finish") && !slices.Contains(types, "abort") && !slices.Contains(types, "error")
	c.mu.Lock()
	defer c.mu.Unlock()
	if normal {
		c.s.answered = append(c.s.answered, s.messageID())
	}
	if cancelled {
		c.s.cancels++
		switch {
		case slices.Contains(types, "abort"):
			c.s.aborted++
		case time.Since(cancelledAt) > chaosCancelDelay:
			// The running replica sees a cancel at once (NOTIFY) or at its
			// lease's next renewal; a turn that streams on for longer than
			// that was not reached. One that ended sooner may have finished
			// its stream before the cancel got there.
			c.s.fail("chat %s: a cancel from another replica answered cancelled, but the turn streamed on for %v and ended %v",
				msgID, time.Since(cancelledAt).Round(time.Millisecond), types[len(types)-1])
		}
	}
	if resumed != nil && resumed.messageID() != s.messageID() {
		// The resume replayed another turn of the session: right only when
		// this one had ended (its next turn, on any replica, was then the
		// one in flight), give or take the client's reading lag.
		if left := int64(len(s.Chunks)) - answeredAt.Load(); left > chaosMissMargin {
			c.s.fail("chat %s: a resume on another replica replayed message %q with %d of this turn's %d chunks still to come",
				msgID, resumed.messageID(), left, len(s.Chunks))
		}
		resumed = nil
	}
	if resumed != nil && normal {
		switch {
		case !resumedOK:
			c.s.fail("chat %s: the stream resumed on another replica is incomplete (%v) while the original ended normally", msgID, resumed.types())
		case !sameChunks(s.Chunks, resumed.Chunks):
			c.s.fail("chat %s: the stream resumed on another replica differs from the original", msgID)
		}
	}
}

// cancel asks a replica other than the one running the session's turn to
// cancel it and reports whether it answered cancelled: true, and whether
// it answered at all (200 with a body): a replica killed while the
// request was in flight, or one that failed it, said nothing about the
// turn.
func (c *chaosClient) cancel(ctx context.Context, running int) (cancelled, answered bool) {
	_, url := c.rs.pick(running)
	if url == "" {
		return false, false
	}
	resp, err := c.send(ctx, http.MethodPost, url+"/v1/agents/demo/sessions/"+c.s.id+"/cancel", nil)
	if err != nil {
		return false, false
	}
	defer resp.Body.Close()
	var out struct {
		Cancelled bool `json:"cancelled"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil {
		return false, false
	}
	return out.Cancelled, true
}

// resume reads the session's in-flight stream from a replica other than
// the one running it, which must replay the turn from its first chunk and
// end; answered runs when that replica answers with a stream. It returns
// the stream read (nil when there was none to read: the turn had ended, or
// that replica was killed), whether it ended normally and whether the
// replica answered 204, no turn running.
func (c *chaosClient) resume(running int, answered func()) (_ *uiStream, ok, none bool) {
	ctx, cancel := context.WithTimeout(context.Background(), chaosStreamTimeout)
	defer cancel()
	_, url := c.rs.pick(running)
	if url == "" {
		return nil, false, false
	}
	resp, err := c.send(ctx, http.MethodGet, url+"/v1/agents/demo/chat/"+c.s.id+"/stream", nil)
	if err != nil {
		return nil, false, false
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNoContent {
		return nil, false, true
	}
	if resp.StatusCode != http.StatusOK {
		c.fail("resume of session %s: status %d", c.s.id, resp.StatusCode)
		return nil, false, false
	}
	answered()
	s, ok, err := readStream(resp.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.resumes++
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		c.s.fail("resume of session %s did not end within %v", c.s.id, chaosStreamTimeout)
		return nil, false, false
	case err != nil && !ok:
		return nil, false, false // that replica was killed while streaming
	}
	if ok {
		c.s.complete++
	}
	return s, ok, false
}

func (c *chaosClient) fail(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.fail(format, args...)
}

// submit stores a durable submission of a new user message, retrying on
// other replicas with the same Idempotency-Key until one accepts it.
func (c *chaosClient) submit(msgID string) {
	body := map[string]any{
		"messages": []map[string]any{{"id": msgID, "role": "user", "parts": []map[string]any{{"type": "text", "text": "tally " + msgID}}}},
		"async":    true,
	}
	for range 20 {
		_, url := c.rs.pick()
		if url == "" {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := c.send(ctx, http.MethodPost, url+"/v1/agents/demo/sessions/"+c.s.id+"/messages", body, "Idempotency-Key", msgID)
		if err != nil {
			cancel()
			continue
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		switch resp.StatusCode {
		case http.StatusAccepted, http.StatusOK:
			var out struct {
				SubmissionID string `json:"submissionId"`
			}
			if err := json.Unmarshal(data, &out); err != nil || out.SubmissionID == "" {
				c.fail("submission %s: %s", msgID, data)
				return
			}
			c.mu.Lock()
			c.s.acked = append(c.s.acked, msgID)
			c.s.subs = append(c.s.subs, out.SubmissionID)
			c.mu.Unlock()
			return
		case http.StatusTooManyRequests:
			return
		case http.StatusServiceUnavailable:
			continue // shutting down or not ready
		default:
			c.fail("submission %s: status %d: %s", msgID, resp.StatusCode, data)
			return
		}
	}
}

// resumeAny resumes the session's stream on a random replica, whatever
// runs there: 204 when no turn runs, else a stream that must end.
func (c *chaosClient) resumeAny() {
	ctx, cancel := context.WithTimeout(context.Background(), chaosStreamTimeout)
	defer cancel()
	_, url := c.rs.pick()
	if url == "" {
		return
	}
	resp, err := c.send(ctx, http.MethodGet, url+"/v1/agents/demo/chat/"+c.s.id+"/stream", nil)
	if err != nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return
	}
	_, ok, err := readStream(resp.Body)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.s.resumes++
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		c.s.fail("a resumed stream did not end within %v", chaosStreamTimeout)
	} else if err == nil && ok {
		c.s.complete++
	}
}

// run runs the session's operations until end.
func (c *chaosClient) run(end time.Time) {
	for n := 0; time.Now().Before(end); n++ {
		time.Sleep(time.Duration(1000+rand.IntN(2000)) * time.Millisecond)
		msgID := fmt.Sprintf("%s-u%d", c.s.id, n)
		switch x := rand.Float64(); {
		case x < 0.45:
			c.chat(msgID)
		case x < 0.85:
			c.submit(msgID)
		default:
			c.resumeAny()
		}
	}
}

// TestMultiReplicaChaos runs three replicas of the built gateway on one
// PostgreSQL schema while 64 clients spread chats, resumed streams,
// cancels and durable submissions over them at random, and replicas are
// killed with SIGKILL and restarted at random. Then every replica is up
// and it checks: no acknowledged user message lost or stored twice; no
// assistant message stored twice, none lost of a stream that finished or a
// submission that completed; every submission completed, its answer
// stored once; no tool call executed twice for one tool call id (every
// retry of a call carries its first Idempotency-Key, so the test backend,
// which deduplicates by it as a backend should, executes it once, and chat
// turns are never retried); every resumed stream ended; and every replica
// serves the same transcripts.
func TestMultiReplicaChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos test runs about a minute")
	}
	dir := fixture(t, "chaos")
	dsn, schema, conn := pgSchema(t)
	tally := startTallyBackend(t)
	env := []string{"TURNGATE_TEST_STORE_DSN=" + dsn, "TURNGATE_TEST_TALLY_URL=" + tally.URL}

	rs := &replicaSet{urls: make([]string, chaosReplicas)}
	for i := range chaosReplicas {
		cfg := fmt.Sprintf("replica-%d.yaml", i)
		data, err := os.ReadFile(dir + "/turngate.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dir+"/"+cfg, append(data, fmt.Appendf(nil, "\nreplica:\n  id: chaos-%d\n  leaseTtl: 2s\n", i)...), 0o644); err != nil {
			t.Fatal(err)
		}
		g := startGateway(t, gatewayOptions{Config: cfg, Dir: dir, Env: env})
		rs.gws = append(rs.gws, g)
		rs.set(i, g.URL)
	}

	clients := make([]*chaosClient, chaosSessions)
	httpc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var wg sync.WaitGroup
	end := time.Now().Add(chaosDuration)
	for i := range clients {
		clients[i] = &chaosClient{rs: rs, http: httpc, s: &chaosSession{id: fmt.Sprintf("chaos-%02d", i)}}
		wg.Go(func() { clients[i].run(end) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()

	// The chaos, on the test goroutine (starting a gateway may fail the
	// test): kill a random replica, restart it a moment later.
	kills := 0
	for running := true; running; {
		select {
		case <-done:
			running = false
			continue
		case <-time.After(chaosKillEvery/2 + rand.N(chaosKillEvery)):
		}
		i := rand.IntN(chaosReplicas)
		rs.set(i, "")
		rs.gws[i].Kill()
		kills++
		time.Sleep(time.Duration(200+rand.IntN(800)) * time.Millisecond)
		rs.gws[i].start()
		rs.set(i, rs.gws[i].URL)
	}
	t.Logf("%d replicas killed with SIGKILL and restarted", kills)

	// Every submission ends.
	var subs []string
	for _, c := range clients {
		subs = append(subs, c.s.subs...)
	}
	status := map[string]string{}
	deadline := time.Now().Add(chaosDrainTimeout)
	for {
		pending := 0
		rows, err := conn.Query(context.Background(), `SELECT id, status FROM `+schema+`.submissions`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var id, st string
			if err := rows.Scan(&id, &st); err != nil {
				t.Fatal(err)
			}
			status[id] = st
			if st == "queued" || st == "running" {
				pending++
			}
		}
		rows.Close()
		if pending == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}

	var problems []string
	resumes, complete, acked, cancels, aborted := 0, 0, 0, 0, 0
	for _, c := range clients {
		s := c.s
		problems = append(problems, s.problems...)
		resumes, complete, acked = resumes+s.resumes, complete+s.complete, acked+len(s.acked)
		cancels, aborted = cancels+s.cancels, aborted+s.aborted
		var transcripts [][]uiMessage
		for i := range chaosReplicas {
			var out struct {
				Messages []uiMessage `json:"messages"`
			}
			code, err := rs.gws[i].getJSON("/v1/agents/demo/sessions/"+s.id+"/messages", &out)
			if err != nil || (code != http.StatusOK && code != http.StatusNotFound) {
				problems = append(problems, fmt.Sprintf("%s: replica %d answered the transcript %d, %v", s.id, i, code, err))
				continue
			}
			transcripts = append(transcripts, out.Messages)
		}
		if len(transcripts) == 0 {
			continue
		}
		msgs := transcripts[0]
		for i, other := range transcripts[1:] {
			if mustJSON(t, other) != mustJSON(t, msgs) {
				problems = append(problems, fmt.Sprintf("%s: replica %d serves another transcript than replica 0", s.id, i+1))
			}
		}
		count := map[string]int{}
		for _, m := range msgs {
			count[m.ID]++
			if count[m.ID] == 2 {
				problems = append(problems, fmt.Sprintf("%s: %s message %s stored twice", s.id, m.Role, m.ID))
			}
		}
		for _, id := range s.acked {
			if count[id] == 0 {
				problems = append(problems, fmt.Sprintf("%s: acknowledged user message %s lost", s.id, id))
			}
		}
		for _, id := range s.answered {
			if count[id] == 0 {
				problems = append(problems, fmt.Sprintf("%s: assistant message %s of a finished stream lost", s.id, id))
			}
		}
		for _, id := range s.subs {
			if st := status[id]; st != "completed" {
				problems = append(problems, fmt.Sprintf("%s: submission %s ended %q, want completed", s.id, id, st))
			}
		}
	}
	// The answers of completed submissions are stored, once.
	type completedSub struct {
		session, id string
		result      []byte
		attempts    int
	}
	var completed []completedSub
	rows, err := conn.Query(context.Background(), `SELECT session_id, id, result, attempts FROM `+schema+`.submissions WHERE status = 'completed'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var c completedSub
		if err := rows.Scan(&c.session, &c.id, &c.result, &c.attempts); err != nil {
			t.Fatal(err)
		}
		completed = append(completed, c)
	}
	rows.Close()
	retried := 0
	for _, c := range completed {
		if c.attempts > 1 {
			retried++
		}
		var res struct {
			Message struct {
				ID string `json:"id"`
			} `json:"message"`
		}
		if err := json.Unmarshal(c.result, &res); err != nil || res.Message.ID == "" {
			problems = append(problems, fmt.Sprintf("%s: submission %s result %s names no message", c.session, c.id, c.result))
			continue
		}
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT COUNT(*) FROM `+schema+`.messages m JOIN `+schema+`.sessions x ON x.pk = m.session_pk
			WHERE x.id = $1 AND m.message_id = $2`, c.session, []byte(res.Message.ID)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			problems = append(problems, fmt.Sprintf("%s: the answer %s of completed submission %s is stored %d times", c.session, res.Message.ID, c.id, n))
		}
	}

	tally.mu.Lock()
	calls, repeats := len(tally.keys), 0
	if tally.missing > 0 {
		problems = append(problems, fmt.Sprintf("%d tool calls carried no Idempotency-Key", tally.missing))
	}
	for call, keys := range tally.keys {
		if len(keys) != 1 {
			problems = append(problems, fmt.Sprintf("tool call %s of request %s ran under %d Idempotency-Keys: executed %d times", call[1], call[0], len(keys), len(keys)))
		}
		n := tally.requests[keys[0]]
		if n > 1 {
			repeats++
			if !strings.HasPrefix(call[0], "sub_") {
				problems = append(problems, fmt.Sprintf("tool call %s of chat request %s was sent %d times: chat turns are never re-run", call[1], call[0], n))
			}
		}
	}
	tally.mu.Unlock()

	t.Logf("%d sessions, %d acknowledged user messages, %d submissions (%d claimed more than once), %d tool calls (%d interrupted and retried under the same key), %d resumed streams (%d complete), %d cancels from another replica (%d aborted the turn)",
		chaosSessions, acked, len(subs), retried, calls, repeats, resumes, complete, cancels, aborted)
	if len(problems) > 0 {
		slices.Sort(problems)
		t.Errorf("%d violations:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}
