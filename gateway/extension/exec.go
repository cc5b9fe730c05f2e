package extension

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/turngate/turngate/internal/childenv"
)

// Restart backoff of the exec transport: the first restart waits
// restartMin, each quick death doubles the wait up to restartMax, and a
// process that ran restartReset or longer restarts after restartMin again.
const (
	restartMin   = 100 * time.Millisecond
	restartMax   = 30 * time.Second
	restartReset = 10 * time.Second
	// stopGrace is how long a process has to exit after an interrupt at
	// Close before it is killed.
	stopGrace = 2 * time.Second
)

// errNotRunning is a delivery while the exec extension's process is down
// (between a death and its restart).
var errNotRunning = errors.New("extension process is not running")

// execTransport runs argv as a long-lived child: one JSON envelope per
// stdin line, one JSON answer per stdout line carrying the envelope's id.
// Answers may come in any order. The child is restarted when it dies.
type execTransport struct {
	argv []string
	env  []string // childenv.Env: never the gateway's whole environment
	log  *slog.Logger

	mu   sync.Mutex
	proc *process // nil while down
	// up is closed when a process starts; a fresh one replaces it when
	// the process dies, so a call can wait for the next start.
	up chan struct{}

	ctx    context.Context // cancelled by close
	cancel context.CancelFunc
	done   chan struct{} // closed when the supervisor has stopped
}

// process is one run of the child.
type process struct {
	writes chan []byte
	dead   chan struct{} // closed when the process has exited

	mu      sync.Mutex
	pending map[uint64]chan []byte
}

func newExecTransport(argv []string, env map[string]string, log *slog.Logger) *execTransport {
	t := &execTransport{argv: argv, env: childenv.Env(env), log: log, done: make(chan struct{}), up: make(chan struct{})}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	go t.supervise()
	return t
}

// supervise runs the child until close, restarting it with backoff.
func (t *execTransport) supervise() {
	defer close(t.done)
	wait := restartMin
	for {
		start := time.Now()
		err := t.runOnce()
		if t.ctx.Err() != nil {
			return
		}
		if time.Since(start) >= restartReset {
			wait = restartMin
		}
		t.log.Warn("extension process exited; restarting", "err", err, "restartIn", wait)
		select {
		case <-time.After(wait):
		case <-t.ctx.Done():
			return
		}
		wait = min(2*wait, restartMax)
	}
}

// runOnce starts the child and serves it until it exits.
func (t *execTransport) runOnce() error {
	cmd := exec.CommandContext(t.ctx, t.argv[0], t.argv[1:]...)
	cmd.Env = t.env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = stopGrace
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", t.argv[0], err)
	}
	p := &process{writes: make(chan []byte), dead: make(chan struct{}), pending: map[uint64]chan []byte{}}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // writer
		defer wg.Done()
		defer stdin.Close()
		for {
			select {
			case line := <-p.writes:
				if _, err := stdin.Write(line); err != nil {
					return
				}
			case <-p.dead:
				return
			}
		}
	}()
	go func() { // reader
		defer wg.Done()
		t.read(p, cmd, stdout)
	}()
	go func() { // the child's log
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 4096), 64<<10)
		for sc.Scan() {
			t.log.Info("extension stderr", "line", sc.Text())
		}
	}()
	t.mu.Lock()
	t.proc = p
	close(t.up)
	t.mu.Unlock()
	err = cmd.Wait()
	t.mu.Lock()
	t.proc, t.up = nil, make(chan struct{})
	t.mu.Unlock()
	close(p.dead)
	wg.Wait()
	return err
}

// read hands each stdout line to the call waiting for its id. A line over
// MaxResponseBytes breaks the protocol: the process is killed (and
// restarted), since the rest of its stream cannot be trusted.
func (t *execTransport) read(p *process, cmd *exec.Cmd, stdout interface{ Read([]byte) (int, error) }) {
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 0, 64<<10), MaxResponseBytes+1)
	for sc.Scan() {
		line := sc.Bytes()
		var head struct {
			ID uint64 `json:"id"`
		}
		if err := json.Unmarshal(line, &head); err != nil || head.ID == 0 {
			t.log.Warn("extension wrote a stdout line that is not an answer with an id; ignored", "bytes", len(line))
			continue
		}
		p.mu.Lock()
		ch := p.pending[head.ID]
		delete(p.pending, head.ID)
		p.mu.Unlock()
		if ch != nil {
			ch <- append([]byte(nil), line...)
		}
	}
	if err := sc.Err(); err != nil {
		t.log.Warn("extension stdout broke the protocol; killing the process", "err", err)
		_ = cmd.Process.Kill()
	}
}

// call waits for a running process (while it starts or restarts) as long
// as ctx allows.
func (t *execTransport) call(ctx context.Context, id uint64, body []byte) ([]byte, error) {
	var p *process
	for {
		t.mu.Lock()
		cur, up := t.proc, t.up
		t.mu.Unlock()
		if p = cur; p != nil {
			break
		}
		select {
		case <-up:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", errNotRunning, ctx.Err())
		}
	}
	ch := make(chan []byte, 1)
	p.mu.Lock()
	p.pending[id] = ch
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
	}()
	line := append(append(make([]byte, 0, len(body)+1), body...), '\n')
	select {
	case p.writes <- line:
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.dead:
		return nil, errNotRunning
	}
	select {
	case answer := <-ch:
		return answer, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-p.dead:
		return nil, errors.New("extension process exited before answering")
	}
}

func (t *execTransport) close() {
	t.cancel()
	<-t.done
}
