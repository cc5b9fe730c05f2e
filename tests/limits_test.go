package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// limitsKey is the API key of the limits fixture.
const limitsKey = "limits-test-KEY-4c3b2a19"

// slowClients is how many idle and how many trickling connections the test
// opens: enough to show each is closed, not a load test.
const slowClients = 20

// TestSlowAndIdleConnections: idle keep-alive connections, unauthenticated
// bodies trickling in and a body shorter than its Content-Length are all
// closed by the gateway (limits.idleTimeout and limits.readBodyTimeout:
// 500 ms in the fixture), while a chat stream that lasts six times as long
// (testdata/limits/script.yaml at 100 ms a part) completes. It runs the
// config from another working directory, so its relative paths are the
// config directory's.
func TestSlowAndIdleConnections(t *testing.T) {
	cfgDir := fixture(t, "limits")
	g := startGateway(t, gatewayOptions{Config: filepath.Join(cfgDir, "turngate.yaml"), Env: []string{"TURNGATE_TEST_KEY=" + limitsKey}})
	g.key = limitsKey
	addr := strings.TrimPrefix(g.URL, "http://")

	type result struct {
		s   *uiStream
		err error
	}
	long := make(chan result, 1)
	rd := g.openChat("demo", userChat("long-stream", "u1", "tell me a long story", nil))
	go func() {
		s, err := rd.finish()
		long <- result{s, err}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, 2*slowClients+1)
	for i := range slowClients {
		wg.Go(func() { errs <- idleAfterHealthz(addr, i) })
		wg.Go(func() { errs <- trickleWrongKey(addr, i) })
	}
	wg.Go(func() { errs <- shortBody(addr) })
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}

	r := <-long
	if r.err != nil {
		t.Fatalf("the long chat stream: %v\n%s", r.err, r.s)
	}
	if r.s.finishReason() != "stop" || !strings.Contains(r.s.text(), "very last word") {
		t.Errorf("the long chat stream did not complete: finish %q, text %q", r.s.finishReason(), r.s.text())
	}
	// The relative store path is the config directory's, not the working
	// directory's.
	if _, err := os.Stat(filepath.Join(cfgDir, "data", "turngate.db")); err != nil {
		t.Errorf("store not beside the config: %v", err)
	}
	if _, err := os.Stat(filepath.Join(g.opts.Dir, "data")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a data directory appeared in the working directory (%v)", err)
	}
}

// idleAfterHealthz sends one GET /healthz on a keep-alive connection and
// then waits for the gateway to close the idle connection.
func idleAfterHealthz(addr string, i int) error {
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	if _, err := readResponse(br, http.StatusOK); err != nil {
		return fmt.Errorf("idle connection %d: %w", i, err)
	}
	return closedByServer(conn, br, fmt.Sprintf("idle connection %d", i))
}

// trickleWrongKey sends a chat request with a wrong key whose body trickles
// in a byte every 100 ms, and waits for the gateway to answer 401 and
// close the connection.
func trickleWrongKey(addr string, i int) error {
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/agents/demo/chat HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer wrong-%d\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", addr, i)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := conn.Write([]byte(" ")); err != nil {
					return
				}
			}
		}
	}()
	if _, err := readResponse(br, http.StatusUnauthorized); err != nil {
		return fmt.Errorf("trickling connection %d: %w", i, err)
	}
	return closedByServer(conn, br, fmt.Sprintf("trickling connection %d", i))
}

// shortBody sends 10 bytes of a 100-byte body and waits for 408 and the
// connection's end.
func shortBody(addr string) error {
	conn, br, err := dial(addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/agents/demo/chat HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"id\":\"s\",", addr, limitsKey)
	body, err := readResponse(br, http.StatusRequestTimeout)
	if err != nil {
		return fmt.Errorf("short body: %w", err)
	}
	if !strings.Contains(body, "request_timeout") {
		return fmt.Errorf("short body: answer %q, want code request_timeout", body)
	}
	return closedByServer(conn, br, "the short body's connection")
}

// dial opens a raw connection; every read on it fails after pollTimeout, so
// a connection the gateway never closes fails the test rather than hangs.
func dial(addr string) (net.Conn, *bufio.Reader, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	if err := conn.SetReadDeadline(time.Now().Add(pollTimeout)); err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, bufio.NewReader(conn), nil
}

// readResponse reads one response and checks its status; it returns the
// body.
func readResponse(br *bufio.Reader, want int) (string, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", fmt.Errorf("reading the response: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("reading the response body: %w", err)
	}
	if resp.StatusCode != want {
		return "", fmt.Errorf("status %d, want %d: %s", resp.StatusCode, want, body)
	}
	return string(body), nil
}

// closedByServer waits until the server closes conn: a read that ends in
// EOF or a reset, not in the test's own deadline.
func closedByServer(conn net.Conn, br *bufio.Reader, what string) error {
	_, err := br.ReadByte()
	var ne net.Error
	switch {
	case err == nil:
		return fmt.Errorf("%s: the gateway sent more bytes instead of closing", what)
	case errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%s: still open after %v", what, pollTimeout)
	}
	return nil // io.EOF, or a reset of a connection closed with unread data
}

// TestConnectionCap: with limits.maxConnections 4, a request on a fifth
// connection is served only once the gateway has closed one of four
// connections that never send a request (limits.readHeaderTimeout, 2s).
func TestConnectionCap(t *testing.T) {
	cfgDir := fixture(t, "limits")
	g := startGateway(t, gatewayOptions{Config: filepath.Join(cfgDir, "cap.yaml"), Env: []string{"TURNGATE_TEST_KEY=" + limitsKey}})
	addr := strings.TrimPrefix(g.URL, "http://")
	type held struct {
		conn net.Conn
		br   *bufio.Reader
	}
	var silent []held
	for range 4 {
		conn, br, err := dial(addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		silent = append(silent, held{conn, br})
	}
	conn, br, err := dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	if _, err := readResponse(br, http.StatusOK); err != nil {
		t.Fatalf("the fifth connection: %v", err)
	}
	closed := 0
	for _, h := range silent {
		// An open connection times out at once; a closed one reads EOF.
		if err := h.conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		var ne net.Error
		if _, err := h.br.ReadByte(); err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			closed++
		}
	}
	if closed == 0 {
		t.Error("the fifth connection was served while four others were open: no connection cap")
	}
}
