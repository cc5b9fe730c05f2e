package gateway

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/store"
	"github.com/turngate/turngate/gateway/uistream"
)

// errRemoteCancel is the cause of a turn cancelled from another replica.
var errRemoteCancel = errors.New("cancelled from another replica")

// replicas coordinates this gateway with the other replicas of a shared
// database (a store that implements store.Relay, PostgreSQL): a session's
// turn runs under the session's lease, its stream is relayed through the
// database while a reader on another replica follows it, and cancels reach
// it from any replica. nil on SQLite, whose file serves one process.
type replicas struct {
	s     *Server
	relay store.Relay

	// pauseHeartbeats, set by tests, stops the lease renewals as a paused
	// process would.
	pauseHeartbeats atomic.Bool
	// beforeRelease, set by tests, runs before a turn's lease is released:
	// before its FinishTurn (see finishing) or when its holding ends.
	beforeRelease func()

	// waiters are this replica's requests queued for sessions' leases.
	waiters *turnQueue
	// revisions reports this replica's rules revision to the store.
	revisions *revisionReporter

	mu      sync.Mutex
	holding map[string]*holding // this replica's leases, by session key
	// wakers holds, by session key, the wake-up channel of each reader of
	// the session's relayed stream on this replica (see watch); a key is
	// there only while a reader is, so a stream notification of a session
	// nobody here reads costs one lookup.
	wakers map[string]map[chan struct{}]struct{}
}

func newReplicas(s *Server, relay store.Relay) *replicas {
	r := &replicas{s: s, relay: relay, holding: map[string]*holding{}, wakers: map[string]map[chan struct{}]struct{}{}, waiters: newTurnQueue()}
	r.revisions = &revisionReporter{r: r}
	return r
}

// holding is a session lease this replica holds for a turn.
type holding struct {
	lease *store.Lease
	// ctx is the turn's parent: cancelled with store.ErrFenced when the
	// lease is lost, with errRemoteCancel when a cancel came for it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() // ends the heartbeat and waits for it

	mu sync.Mutex
	// buf is the turn's stream (nil until it starts, and for a turn that
	// streams nothing: a skipped one, one refused at its admission).
	buf *uistream.Buffer
	// followed: a reader on another replica asked for the stream.
	followed bool
	// relayed is closed when the stream's last batch is stored (nil until
	// the relay starts: once the stream has started and is followed).
	relayed chan struct{}

	// finished: the turn's FinishTurn released the lease (see finishing).
	// Set and read by the goroutine that ends the turn.
	finished bool
}

// finishing returns ctx for the FinishTurn of in's turn. When nothing the
// turn writes after it needs the lease (an agent without a session
// configuration, whose memory the turn's end updates), it asks the finish
// to release the lease in its own transaction (store.WithRelease), unless
// a reader follows the stream: one statement less per turn, and the
// renewals stop there.
func (r *replicas) finishing(ctx context.Context, in *turnInput) context.Context {
	h := in.holding
	if r == nil || h == nil || in.agent.session != nil {
		return ctx
	}
	if r.beforeRelease != nil {
		r.beforeRelease()
	}
	return store.WithRelease(ctx, h.lease, &h.finished)
}

// acquire takes the session's lease for this replica, at once when it is
// free and nobody waits for it, else in the session's queue (see queue)
// until ctx ends, and starts renewing it.
func (r *replicas) acquire(ctx context.Context, tenant, sessionID, key string, bounded bool) (*holding, error) {
	cfg := r.s.conf().Replica
	l, err := r.s.store.AcquireLease(ctx, tenant, sessionID, cfg.ID, cfg.LeaseTTL)
	if errors.Is(err, store.ErrLeaseHeld) {
		l, err = r.queue(ctx, tenant, sessionID, key, bounded)
	}
	if err != nil {
		return nil, err
	}
	return r.hold(key, l), nil
}

// hold starts the heartbeat of l, the lease of the session key.
func (r *replicas) hold(key string, l *store.Lease) *holding {
	ttl := r.s.conf().Replica.LeaseTTL
	ctx, cancel := context.WithCancelCause(r.s.baseCtx)
	h := &holding{lease: l, ctx: store.WithLease(ctx, l), cancel: cancel}
	h.stop = every(ttl/3, func(hb context.Context) bool {
		if r.pauseHeartbeats.Load() {
			return true
		}
		st, err := r.s.store.RenewLease(hb, l, ttl)
		switch {
		case errors.Is(err, store.ErrFenced):
			r.s.log.Warn("session lease lost; the turn ends as an error", "session", l.SessionID, "token", l.Token)
			cancel(store.ErrFenced)
			return false
		case errors.Is(err, store.ErrLeaseReleased):
			return false // released with the turn's finish
		case err != nil && hb.Err() == nil:
			r.s.log.Error("renewing session lease", "session", l.SessionID, "err", err)
		case st.Cancelled:
			cancel(errRemoteCancel)
		}
		if st.Followed {
			r.follow(h) // its notification may have been missed
		}
		return true
	})
	r.mu.Lock()
	r.holding[key] = h
	r.mu.Unlock()
	return h
}

// end ends h, the holding of the session key, and releases its lease so
// the session's next turn, on any replica, need not wait for it to expire
// (unless the turn's finish released it already).
// A stream that a reader follows is relayed to its last batch first: when
// no relay runs, the release is refused if a reader asked for the stream
// meanwhile (its notification not yet heard), and the stream is relayed,
// whole, before the lease is released. So a reader either gets the whole
// stream or finds the lease released, the turn's message stored.
func (r *replicas) end(key string, h *holding) {
	h.stop()
	if r.beforeRelease != nil && !h.finished {
		r.beforeRelease()
	}
	h.mu.Lock()
	var relayed <-chan struct{} = h.relayed
	streamed := h.buf != nil
	h.mu.Unlock()
	release := !h.finished
	if release && relayed == nil && streamed {
		ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
		released, err := r.relay.ReleaseUnfollowed(ctx, h.lease)
		cancel()
		if err != nil {
			r.s.log.Error("releasing session lease", "session", h.lease.SessionID, "err", err)
		}
		release = !released
		if !released {
			relayed = r.follow(h)
		}
	}
	if relayed != nil {
		<-relayed
	}
	r.mu.Lock()
	if r.holding[key] == h {
		delete(r.holding, key)
	}
	r.mu.Unlock()
	if release {
		// A timeout of its own: the wait for the relay above may have
		// taken most of one.
		ctx, cancel := context.WithTimeout(context.Background(), persistTimeout)
		if err := r.s.store.ReleaseLease(ctx, h.lease); err != nil {
			r.s.log.Error("releasing session lease", "session", h.lease.SessionID, "err", err)
		}
		cancel()
	}
	h.cancel(nil)
}

// cancelRemote asks the replica running the tenant's session's turn to
// cancel it; it reports whether one runs. A token other than 0 cancels only
// the turn of that lease token, not a later one.
func (r *replicas) cancelRemote(ctx context.Context, tenant, sessionID string, token int64) (bool, error) {
	return r.s.store.CancelLease(ctx, tenant, sessionID, token)
}

// notified handles a notification of any replica: a cancel for a lease this
// replica holds cancels its turn, a follow relays its stream; a stored
// stream batch wakes the readers; a released lease wakes this replica's
// first waiter for it.
func (r *replicas) notified(n store.Notification) {
	key := sessionKey(n.Tenant, n.SessionID)
	r.mu.Lock()
	defer r.mu.Unlock()
	switch n.Channel {
	case store.ChannelCancel:
		if h := r.holding[key]; h != nil && h.lease.Token == n.Token {
			h.cancel(errRemoteCancel)
		}
	case store.ChannelFollow:
		if h := r.holding[key]; h != nil && h.lease.Token == n.Token {
			r.follow(h)
		}
	case store.ChannelStream:
		for ch := range r.wakers[key] {
			select {
			case ch <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
	case store.ChannelLease:
		r.waiters.wake(key)
	case store.ChannelKillSwitch:
		r.s.kill.Wake()
	case store.ChannelErased:
		r.s.decisionsErased(n.Tenant, n.SessionID)
	}
}

// watch registers a reader of the relayed stream of the session key: wake
// receives at the session's stream notifications until stop, which the
// reader calls however it stops, removes the registration (and the key
// with its last reader, so a session never streamed again keeps nothing).
// Each reader has its own channel, so readers of one session are each
// woken; it holds one pending wake-up, so a notification that comes while
// the reader reads wakes its next wait.
func (r *replicas) watch(key string) (wake <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	r.mu.Lock()
	defer r.mu.Unlock()
	set := r.wakers[key]
	if set == nil {
		set = map[chan struct{}]struct{}{}
		r.wakers[key] = set
	}
	set[ch] = struct{}{}
	return ch, func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		delete(r.wakers[key], ch)
		if len(r.wakers[key]) == 0 {
			delete(r.wakers, key)
		}
	}
}

// listen runs the notification listener until ctx ends, listening again
// after a broken connection; a missed notification costs only latency:
// stream readers and waiters also poll, and a cancel also reaches the
// holder at its next renewal.
func (r *replicas) listen(ctx context.Context, ready func()) {
	backoff := listenRetry
	for ctx.Err() == nil {
		err := r.relay.Listen(ctx, ready, r.notified)
		ready = nil
		if err == nil || ctx.Err() != nil {
			return
		}
		r.s.log.Error("listening for replica notifications", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// Relay batching: the owner of a turn stores its stream's frames at most
// every relayInterval (one statement for all the frames since the last),
// so a turn costs the database one insert per interval, not one per chunk.
const relayInterval = 50 * time.Millisecond

// attach makes buf the stream of h's turn, relayed at once if a reader
// already follows it.
func (r *replicas) attach(h *holding, buf *uistream.Buffer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.buf = buf
	if h.followed {
		r.relayOut(h)
	}
}

// follow marks h's stream followed by a reader on another replica and
// starts relaying it, from its first chunk, once it has started; it returns
// the channel closed when the relay's last batch is stored (nil before the
// stream starts).
func (r *replicas) follow(h *holding) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.followed = true
	if h.buf != nil && h.relayed == nil {
		r.relayOut(h)
	}
	return h.relayed
}

// relayOut relays h.buf, the stream of h's turn, through the database from
// its first frame until it closes; h.relayed is closed once the last batch
// is stored. The first batch holds all the frames so far; then it stores
// the frames gathered since the last batch when it has caught up with the
// turn, at most every relayInterval. h.mu is held.
func (r *replicas) relayOut(h *holding) {
	buf, relayed := h.buf, make(chan struct{})
	h.relayed = relayed
	go func() {
		defer close(relayed)
		ctx := context.WithoutCancel(h.ctx)
		var (
			seq     int64
			pending []byte
			last    time.Time
		)
		err := buf.Walk(ctx, 0, func(frames [][]byte, closed bool) error {
			for _, f := range frames {
				pending = append(pending, f...)
			}
			if len(frames) > 0 && !closed {
				return nil // more may be there: read on before storing
			}
			if len(pending) == 0 && !closed {
				return nil
			}
			if !closed {
				// Frames appended meanwhile wake the walk's next wait.
				time.Sleep(time.Until(last.Add(relayInterval)))
			}
			if err := r.relay.AppendChunk(ctx, h.lease, seq, pending, closed); err != nil {
				return err
			}
			seq, pending, last = seq+1, pending[:0], time.Now()
			return nil
		})
		if err != nil {
			r.s.log.Error("relaying stream", "session", h.lease.SessionID, "err", err)
		}
	}()
}

// Relay reading: a reader on another replica reads relayPage batches per
// query, so its memory is bounded by a page whatever the stream's length,
// and polls every relayPoll when no notification woke it.
const (
	relayPage = 64
	relayPoll = 200 * time.Millisecond
)

// streamSink is where resume writes a relayed stream: the response of GET
// …/chat/:id/stream (httpSink) or a WebSocket request's frames (wsRelay).
type streamSink interface {
	// write writes frames, whole SSE frames of the UI message stream in
	// order; the first call starts the response. An error (the client
	// went away) ends the resume.
	write(frames []byte) error
	// flush sends what was written.
	flush()
}

// resume writes to out the stream of the tenant's session's running turn,
// relayed through the database by the replica that runs it, from its first
// chunk until it ends or ctx does. ctx is the reader's request: the stream
// is followed only while it lasts (see findTurn), and once it ends resume
// neither waits nor reads on. It asks the turn's replica to relay the
// stream (FollowStream), again at each poll until the first batch comes,
// so a missed notification costs latency, not the resume. It reports
// false, having written nothing, when no turn runs (or it ended before the
// relay began: then the turn's message is stored), and true when it has
// answered the reader or found it gone. Once it has found the turn, it
// calls following (when not nil) with the turn's lease token; the turn is
// looked for then even when ctx has ended, so a request aborted meanwhile
// knows which turn to cancel.
func (r *replicas) resume(ctx context.Context, out streamSink, tenant, sessionID string, following func(token int64)) (bool, error) {
	if ctx.Err() != nil && following == nil {
		return true, nil // the reader left: nobody to answer, no turn to find
	}
	token, ok, err := r.findTurn(ctx, tenant, sessionID)
	if err != nil || !ok {
		return false, err
	}
	if following != nil {
		following(token)
	}
	// Registered before the first read, so no batch goes unnoticed.
	wake, stop := r.watch(sessionKey(tenant, sessionID))
	defer stop()
	var (
		from    int64
		started bool
		ending  bool // the turn's lease is gone: one last read
	)
	for {
		if ctx.Err() != nil {
			return true, nil // the reader left: nothing more is read for it
		}
		chunks, err := r.relay.ReadChunks(ctx, tenant, sessionID, token, from, relayPage)
		switch {
		case ctx.Err() != nil:
			return true, nil // the reader left during the read
		case err != nil && started:
			r.s.log.Error("reading relayed stream", "session", sessionID, "err", err)
			return true, nil
		case err != nil:
			return false, err
		}
		for _, ch := range chunks {
			if !started {
				r.s.metrics.ActiveStreams.Inc()
				defer r.s.metrics.ActiveStreams.Dec()
				started = true
			}
			if err := out.write(ch.Frames); err != nil {
				return true, nil // the client went away
			}
			from = ch.Seq + 1
			if ch.Done {
				out.flush()
				return true, nil
			}
		}
		if len(chunks) == relayPage {
			continue
		}
		if started {
			out.flush()
		}
		if ending {
			return started, nil
		}
		select {
		case <-ctx.Done():
			return true, nil
		case <-wake:
		case <-time.After(relayPoll):
			// The turn may have ended without a last batch (its replica
			// died): then its lease is gone or another's. Until the
			// first batch, the poll asks for the stream again.
			live := r.relay.LiveStream
			if !started {
				live = r.relay.FollowStream
			}
			if tok, ok, err := live(ctx, tenant, sessionID); err == nil && (!ok || tok != token) {
				ending = true
			}
		}
	}
}

// findTurn returns the lease token of the tenant's session's running turn,
// its stream's name; ok is false when none runs. While ctx, the reader's
// request, lasts, it asks the turn's replica to relay the stream
// (FollowStream); once ctx has ended it only looks the turn up
// (LiveStream): a reader already gone (a load balancer's probe, a client
// that timed out) marks nothing, else the turn's replica would relay its
// whole stream through the database for nobody. Either statement runs to
// its end whatever ctx does meanwhile, so its answer is known: the stream
// followed or not, and the turn a request aborted meanwhile must cancel.
func (r *replicas) findTurn(ctx context.Context, tenant, sessionID string) (token int64, ok bool, err error) {
	find := r.relay.FollowStream
	if ctx.Err() != nil {
		find = r.relay.LiveStream
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), persistTimeout)
	defer cancel()
	return find(fctx, tenant, sessionID)
}

// sweepEvery is how often a replica deletes the relayed batches of turns
// that ended (or whose replica died) more than relayKeep ago.
const (
	sweepEvery = time.Minute
	relayKeep  = time.Minute
)

// sweep deletes old relayed batches and the expired places of waiters.
func (r *replicas) sweep(ctx context.Context) bool {
	if _, err := r.relay.SweepStreams(ctx, relayKeep); err != nil && ctx.Err() == nil {
		r.s.log.Error("sweeping relayed streams", "err", err)
	}
	if _, err := r.relay.SweepWaiters(ctx); err != nil && ctx.Err() == nil {
		r.s.log.Error("sweeping expired waiters", "err", err)
	}
	return true
}

// start starts the listener, the sweeper, the renewals of the waiters'
// places and the reports of the rules revision until stop; it waits (a
// short while) for the listener to listen, so cancels reach this replica
// from its first turn.
func (r *replicas) start() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() { r.listen(ctx, func() { once.Do(func() { close(ready) }) }) })
	stopSweeps := every(sweepEvery, r.sweep)
	stopRenewals := every(r.s.conf().Replica.LeaseTTL/3, func(ctx context.Context) bool { r.renewWaiters(ctx); return true })
	stopReports := atOnceThenEvery(revisionCheckEvery, r.revisions.check)
	select {
	case <-ready:
	case <-time.After(listenWait):
		r.s.log.Warn("replica notifications are not listened to yet; cancels from other replicas arrive at the next lease renewal")
	}
	return func() { cancel(); stopSweeps(); stopRenewals(); stopReports(); wg.Wait() }
}

// listenWait bounds how long Start waits for the notification listener;
// listenRetry is the first pause before listening again after a broken
// connection (doubling up to 10 s).
const (
	listenWait  = 5 * time.Second
	listenRetry = 200 * time.Millisecond
)

// take takes the session's lease for in's turn, queueing for it as
// acquire does: on a shared store the lease and its queue in the database
// are the session's turn lock, on every replica alike (the in-process lock
// is not taken, so there is no second order to deadlock with). It returns
// ctx carrying the lease (every transcript write of the turn is fenced by
// it) and the release that ends the holding.
func (r *replicas) take(ctx context.Context, in *turnInput, key string) (context.Context, func(), error) {
	h, err := r.acquire(ctx, in.principal.Tenant, in.sessionID, key, in.bounded)
	if err != nil {
		return nil, nil, err
	}
	in.holding = h
	var once sync.Once
	return store.WithLease(ctx, h.lease), func() { once.Do(func() { r.end(key, h) }) }, nil
}

// fencedResult turns the result of a turn whose lease was lost (the turn
// was cancelled with store.ErrFenced) into an error: its writes are
// refused, so it stored nothing.
func fencedResult(ctx context.Context, res *engine.TurnResult) *engine.TurnResult {
	if !errors.Is(context.Cause(ctx), store.ErrFenced) {
		return res
	}
	fenced(res)
	return res
}

// fenced makes res, the result of a turn whose lease was lost, an error.
func fenced(res *engine.TurnResult) {
	res.Status, res.FinishReason, res.Error = engine.StatusError, engine.FinishError, errFencedText
}

// errFencedText is the error of a turn fenced out of its session.
const errFencedText = "the session's lease was lost to another replica; nothing of this turn was stored"
