package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/gateway/config"
	goldenfile "github.com/turngate/turngate/internal/golden"
)

// fileServer is a remote file host at the edge of the world: a real TLS
// server whose certificate the gateway's fetches trust (fetchRootCAs).
type fileServer struct {
	*httptest.Server
	hits atomic.Int32
}

// fetchLimit is the maxBytes of the fetch tests.
const fetchLimit = 1024

func newFileServer(t *testing.T) *fileServer {
	t.Helper()
	f := &fileServer{}
	pdf := []byte("%PDF-1.4\n%%EOF\n")
	big := strings.Repeat("x", fetchLimit+1)
	mux := http.NewServeMux()
	serve := func(path, contentType string, body []byte) {
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", contentType)
			_, _ = w.Write(body)
		})
	}
	serve("/dot.png", "image/png", pngBytes)
	serve("/report.pdf", "application/pdf; qs=1", pdf)
	serve("/big.png", "image/png", []byte(big))
	serve("/page.png", "text/html; charset=utf-8", []byte("<html></html>"))
	mux.HandleFunc("/chunked.png", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		for range fetchLimit/100 + 2 { // no Content-Length: the reading stops at the limit
			_, _ = io.WriteString(w, big[:100])
			w.(http.Flusher).Flush()
		}
	})
	mux.HandleFunc("/to-https", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/dot.png", http.StatusFound)
	})
	mux.HandleFunc("/to-http", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://"+r.Host+"/dot.png", http.StatusFound)
	})
	mux.HandleFunc("/missing.png", http.NotFound)
	stop := make(chan struct{})
	mux.HandleFunc("/hang.png", func(http.ResponseWriter, *http.Request) {
		<-stop // answers nothing while the test runs
	})
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	f.StartTLS()
	t.Cleanup(f.Close)
	t.Cleanup(func() { close(stop) }) // first: lets f.Close finish
	return f
}

// withFetch sets limits.attachments for the fetch tests: fetchRemote on,
// private addresses allowed or not.
func withFetch(fetch, allowPrivate bool) func(*config.Config) {
	return func(c *config.Config) {
		c.Limits.Attachments.FetchRemote = &fetch
		c.Limits.Attachments.FetchAllowPrivate = &allowPrivate
		c.Limits.Attachments.MaxBytes = fetchLimit
	}
}

// trustFileServer makes the gateway's fetches trust f's certificate for
// the test (not parallel: fetchRootCAs is package state).
func trustFileServer(t *testing.T, f *fileServer) {
	fetchRootCAs = f.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	t.Cleanup(func() { fetchRootCAs = nil })
}

// TestFetchRemoteFiles: with fetchRemote, https files are fetched at the
// door and reach the OpenAI upstream inline (a PDF too, which OpenAI only
// takes inline), and are stored inline; every failure is a 400/413 naming
// the part, with nothing stored and no model called.
func TestFetchRemoteFiles(t *testing.T) {
	files := newFileServer(t)
	trustFileServer(t, files)
	oai, claude := newFakeUpstream(t, openAIStream), newFakeUpstream(t, anthropicStream)
	off := false
	g := newTestGateway(t, "basic", withProviders(oai, claude), withFetch(true, true), func(c *config.Config) {
		c.Agents = append(c.Agents, // per-agent overrides
			config.Agent{Name: "impatient", Model: "oai", Attachments: &config.Attachments{FetchTimeout: 50 * time.Millisecond}},
			config.Agent{Name: "nofetch", Model: "oai", Attachments: &config.Attachments{FetchRemote: &off}})
	})

	msg := userWith("u1", "What is in these?", filePart("image/png", files.URL+"/dot.png", "dot.png"),
		filePart("image/png", files.URL+"/to-https", ""))
	resp := g.do("POST", "/v1/agents/oai/chat", map[string]any{"id": "f1", "messages": []any{msg}})
	frames := decodeSSE[map[string]any](t, resp.Body)
	resp.Body.Close()
	if last := frames[len(frames)-1]; last["type"] != "finish" || last["finishReason"] != "stop" {
		t.Fatalf("chat stream ended with %v", last)
	}
	var r turnResponse
	pdf := userWith("u2", "Summarise it.", filePart("application/pdf", files.URL+"/report.pdf", "report.pdf"))
	g.doJSON("POST", "/v1/agents/oai/sessions/f1/messages", map[string]any{"messages": []any{pdf}}, http.StatusOK, &r)
	if r.Status != engine.StatusCompleted {
		t.Fatalf("saveMessages: %+v", r)
	}
	bodies := oai.requests()
	if len(bodies) != 2 {
		t.Fatalf("upstream got %d requests, want 2", len(bodies))
	}
	goldenfile.CheckJSON(t, filepath.Join("testdata", "files", "oai_fetched_image.json"), bodies[0])
	goldenfile.CheckJSON(t, filepath.Join("testdata", "files", "oai_fetched_pdf.json"), bodies[1])
	h := g.history("oai", "f1")
	if len(h) != 4 || h[0].Parts[1].URL != pngURL || !strings.HasPrefix(h[2].Parts[1].URL, "data:application/pdf;base64,") {
		t.Fatalf("history does not keep the fetched files inline: %+v", h)
	}

	for _, tc := range []struct {
		name, path, mediaType string
		status                int
		code, message         string
	}{
		{"over maxBytes", "/big.png", "image/png", http.StatusRequestEntityTooLarge, CodeTooLarge, "more than the limit of 1024 bytes"},
		{"over maxBytes without Content-Length", "/chunked.png", "image/png", http.StatusRequestEntityTooLarge, CodeTooLarge, "more than the limit of 1024 bytes"},
		{"wrong content type", "/page.png", "image/png", http.StatusBadRequest, CodeInvalidAttachment, `Content-Type "text/html" is not the part's mediaType "image/png"`},
		{"content type of another part", "/dot.png", "image/jpeg", http.StatusBadRequest, CodeInvalidAttachment, `Content-Type "image/png" is not the part's mediaType "image/jpeg"`},
		{"redirect to http", "/to-http", "image/png", http.StatusBadRequest, CodeInvalidAttachment, "redirected to a URL that is not https"},
		{"not found", "/missing.png", "image/png", http.StatusBadRequest, CodeInvalidAttachment, "the server answered 404"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := userWith("u1", "look", filePart(tc.mediaType, files.URL+tc.path, ""))
			for _, path := range []string{"/v1/agents/oai/chat", "/v1/agents/oai/sessions/bad/messages"} {
				body := map[string]any{"messages": []any{m}}
				if strings.HasSuffix(path, "/chat") {
					body["id"] = "bad"
				}
				resp := g.do("POST", path, body)
				var e struct{ Code, Message, Pointer string }
				_ = json.NewDecoder(resp.Body).Decode(&e)
				resp.Body.Close()
				if resp.StatusCode != tc.status || e.Code != tc.code || e.Pointer != "/messages/0/parts/1" || !strings.Contains(e.Message, tc.message) {
					t.Errorf("%s: %d %+v, want %d %s %q at /messages/0/parts/1", path, resp.StatusCode, e, tc.status, tc.code, tc.message)
				}
			}
		})
	}
	if n := len(oai.requests()); n != 2 {
		t.Errorf("a refused file reached the model: %d upstream requests", n)
	}
	g.doJSON("GET", "/v1/agents/oai/sessions/bad/messages", nil, http.StatusNotFound, nil) // nothing stored

	// Per agent: a fetch past the agent's fetchTimeout, and an agent that
	// does not fetch (an https PDF cannot go to OpenAI: refused as before).
	for _, tc := range []struct{ agent, path, mediaType, message string }{
		{"impatient", "/hang.png", "image/png", "fetching the url: timed out (limits.attachments.fetchTimeout)"},
		{"nofetch", "/report.pdf", "application/pdf", "files must be sent inline (a data: URL)"},
	} {
		hits := files.hits.Load()
		m := userWith("u1", "look", filePart(tc.mediaType, files.URL+tc.path, ""))
		resp := g.do("POST", "/v1/agents/"+tc.agent+"/sessions/s/messages", map[string]any{"messages": []any{m}})
		var e struct{ Code, Message, Pointer string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Code != CodeInvalidAttachment || e.Pointer != "/messages/0/parts/1" || !strings.Contains(e.Message, tc.message) {
			t.Errorf("%s: %d %+v, want 400 invalid_attachment %q", tc.agent, resp.StatusCode, e, tc.message)
		}
		if fetched := files.hits.Load() > hits; fetched != (tc.agent != "nofetch") {
			t.Errorf("%s: the file server was asked: %v", tc.agent, fetched)
		}
	}
}

// TestFetchRefusesPrivateAddresses: without fetchAllowPrivate, the
// dial-time check refuses the file server on 127.0.0.1 (whatever the host
// name resolved to), the IPv6 transition forms that a NAT64 or 6to4
// network would route to it or to the metadata address, and other
// special-purpose ranges, before any byte is sent.
func TestFetchRefusesPrivateAddresses(t *testing.T) {
	files := newFileServer(t)
	trustFileServer(t, files)
	oai, claude := newFakeUpstream(t, openAIStream), newFakeUpstream(t, anthropicStream)
	g := newTestGateway(t, "basic", withProviders(oai, claude), withFetch(true, false))
	port := files.Listener.Addr().(*net.TCPAddr).Port
	for _, host := range []string{
		files.URL,
		strings.Replace(files.URL, "127.0.0.1", "localhost", 1),
		fmt.Sprintf("https://[64:ff9b::7f00:1]:%d", port),    // NAT64 of 127.0.0.1
		fmt.Sprintf("https://[64:ff9b::a9fe:a9fe]:%d", port), // NAT64 of the metadata address
		fmt.Sprintf("https://[64:ff9b:1::7f00:1]:%d", port),  // local-use NAT64
		fmt.Sprintf("https://[2002:7f00:1::1]:%d", port),     // 6to4 of 127.0.0.1
		fmt.Sprintf("https://[2001::80ff:fffe]:%d", port),    // Teredo, client 127.0.0.1
		fmt.Sprintf("https://[::7f00:1]:%d", port),           // IPv4-compatible 127.0.0.1
		fmt.Sprintf("https://198.18.0.1:%d", port),           // benchmarking
		fmt.Sprintf("https://240.0.0.1:%d", port),            // reserved
	} {
		m := userWith("u1", "look", filePart("image/png", host+"/dot.png", ""))
		resp := g.do("POST", "/v1/agents/oai/sessions/p1/messages", map[string]any{"messages": []any{m}})
		var e struct{ Code, Message, Pointer string }
		_ = json.NewDecoder(resp.Body).Decode(&e)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || e.Code != CodeInvalidAttachment || e.Pointer != "/messages/0/parts/1" ||
			!strings.Contains(e.Message, "resolves to an address that is not public") {
			t.Errorf("%s: %d %+v, want 400 invalid_attachment naming the private address", host, resp.StatusCode, e)
		}
	}
	if n := files.hits.Load(); n != 0 {
		t.Errorf("the file server got %d requests", n)
	}
	if n := len(oai.requests()); n != 0 {
		t.Errorf("the model was called %d times", n)
	}
}

// TestFetchRemoteOff: without fetchRemote (the default) nothing is
// fetched: an https PDF is refused for OpenAI as before, and an https
// image is passed on as its URL.
func TestFetchRemoteOff(t *testing.T) {
	files := newFileServer(t)
	trustFileServer(t, files)
	oai, claude := newFakeUpstream(t, openAIStream), newFakeUpstream(t, anthropicStream)
	g := newTestGateway(t, "basic", withProviders(oai, claude), withFetch(false, true))
	m := userWith("u1", "look", filePart("application/pdf", files.URL+"/report.pdf", ""))
	resp := g.do("POST", "/v1/agents/oai/sessions/o1/messages", map[string]any{"messages": []any{m}})
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("remote PDF to OpenAI: status %d, want 400", resp.StatusCode)
	}
	img := files.URL + "/dot.png"
	g.doJSON("POST", "/v1/agents/oai/sessions/o2/messages", map[string]any{"messages": []any{userWith("u2", "look", filePart("image/png", img, ""))}}, http.StatusOK, nil)
	if bodies := oai.requests(); len(bodies) != 1 || !strings.Contains(string(bodies[0]), `"url":"`+img+`"`) {
		t.Errorf("the remote image did not reach the model as its URL: %s", bodies)
	}
	if h := g.history("oai", "o2"); len(h) != 2 || h[0].Parts[1].URL != img {
		t.Errorf("history = %+v", h)
	}
	if n := files.hits.Load(); n != 0 {
		t.Errorf("the file server got %d requests", n)
	}
}

// TestAnthropicFetchRemote: on POST /v1/messages, image and document
// blocks with a url source follow limits.attachments.fetchRemote as the
// other entry paths do. On, they are fetched at the door with the same
// guards (size, Content-Type, private addresses) and reach the model
// inline; off, nothing is fetched: a url image goes on as its URL and a
// url PDF, which OpenAI takes only inline, is an Anthropic-shaped 400.
func TestAnthropicFetchRemote(t *testing.T) {
	files := newFileServer(t)
	trustFileServer(t, files)
	block := func(typ, path string) map[string]any {
		return map[string]any{"model": "oai", "max_tokens": 64, "messages": []any{map[string]any{"role": "user", "content": []any{
			map[string]any{"type": "text", "text": "What is in it?"},
			map[string]any{"type": typ, "source": map[string]any{"type": "url", "url": files.URL + path}}}}}}
	}
	for _, tc := range []struct {
		name                string
		fetch, allowPrivate bool
		typ, path           string
		status              int
		errType, message    string // the error's, or what the model got
		fetched             bool
	}{
		{"on: image fetched inline", true, true, "image", "/dot.png", http.StatusOK, "", pngURL[len("data:image/png;base64,"):], true},
		{"on: PDF fetched inline", true, true, "document", "/report.pdf", http.StatusOK, "", `"file_data":"data:application/pdf;base64,`, true},
		{"on: over maxBytes", true, true, "image", "/big.png", http.StatusRequestEntityTooLarge, "request_too_large",
			"field messages[0].content[1]: the fetched file is more than the limit of 1024 bytes (limits.attachments.maxBytes)", true},
		{"on: wrong Content-Type", true, true, "image", "/page.png", http.StatusBadRequest, "invalid_request_error",
			`field messages[0].content[1]: fetching the url: the server's Content-Type "text/html" is not the part's mediaType "image/png"`, true},
		{"on: private address", true, false, "image", "/dot.png", http.StatusBadRequest, "invalid_request_error",
			"field messages[0].content[1]: fetching the url: the host resolves to an address that is not public", false},
		{"off: image passed as its URL", false, true, "image", "/dot.png", http.StatusOK, "", `"url":"` + files.URL + `/dot.png"`, false},
		{"off: PDF refused", false, true, "document", "/report.pdf", http.StatusBadRequest, "invalid_request_error",
			"field messages[0].content[1]: application/pdf files must be sent inline (a data: URL)", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oai, claude := newFakeUpstream(t, openAIStream), newFakeUpstream(t, anthropicStream)
			g := newTestGateway(t, "basic", withProviders(oai, claude), withFetch(tc.fetch, tc.allowPrivate))
			hits := files.hits.Load()
			resp := g.do("POST", "/v1/messages", block(tc.typ, tc.path))
			defer resp.Body.Close()
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			_ = json.NewDecoder(resp.Body).Decode(&e)
			bodies := oai.requests()
			switch {
			case resp.StatusCode != tc.status:
				t.Fatalf("status %d %+v, want %d", resp.StatusCode, e, tc.status)
			case tc.errType == "" && (len(bodies) != 1 || !strings.Contains(string(bodies[0]), tc.message)):
				t.Errorf("the model got %s, want it to hold %s", bodies, tc.message)
			case tc.errType != "" && (e.Type != "error" || e.Error.Type != tc.errType || !strings.HasPrefix(e.Error.Message, tc.message)):
				t.Errorf("error %+v, want %s %q", e, tc.errType, tc.message)
			case tc.errType != "" && len(bodies) != 0:
				t.Errorf("a refused file reached the model")
			}
			if fetched := files.hits.Load() > hits; fetched != tc.fetched {
				t.Errorf("the file server was asked: %v, want %v", fetched, tc.fetched)
			}
		})
	}
}
