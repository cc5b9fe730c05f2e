package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// partnerInternals is the outbound-guards partner's 500 body, as its
// backend/ answers it.
const partnerInternals = `pq: password authentication failed for user "inventory" (10.0.3.7:5432)`

// partners are the outbound-guards example's running stand-in partners
// (their other origin's request count) by PARTNER_URL.
var partners sync.Map

// outboundPartner serves the outbound-guards example's partner — /lookup
// redirects with a 307 to another origin, /stock fails with its internals
// — and the other origin, which counts what reaches it, until the test
// ends.
func outboundPartner(t *testing.T) []string {
	reached := new(atomic.Int32)
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached.Add(1) }))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/lookup", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/collect", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/stock", func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, partnerInternals, http.StatusInternalServerError)
	})
	srv := httptest.NewServer(mux)
	partners.Store(srv.URL, reached)
	t.Cleanup(func() {
		srv.Close()
		partners.Delete(srv.URL)
	})
	return []string{"PARTNER_URL=" + srv.URL, "PARTNER_KEY=partner-key-e2e-0123456789"}
}

// exampleOutboundGuards: the partner's redirect to another origin is not
// followed (nothing reaches it), its internals reach neither the client
// nor the model but stay in the audit log, the rule blocks a URL as an
// order id, and a linked file on NAT64's form of the metadata address is
// a 400 before any connection.
func exampleOutboundGuards(t *testing.T, x *exampleRun) {
	url, _ := strings.CutPrefix(x.opts.Env[0], "PARTNER_URL=")
	v, ok := partners.Load(url)
	if !ok {
		t.Fatalf("no partner at %s", url)
	}
	reached := v.(*atomic.Int32)

	for _, tt := range []struct{ session, text, tool, detail string }{
		{"og-lookup", "look up order A-1001", "lookup", "redirect to another origin not followed"},
		{"og-stock", "check stock of lamp", "stock", "status 500: " + partnerInternals},
	} {
		s := x.chat("desk", userChat(tt.session, "u1", tt.text, nil))
		call := mustToolCall(t, s, tt.tool, "tool-output-error")
		if want := fmt.Sprintf("Tool %q failed.", tt.tool); call.ErrorText != want || !strings.Contains(s.text(), "The partner said: "+want) {
			t.Errorf("%s: errorText %q, text %q, want %q for both", tt.tool, call.ErrorText, s.text(), want)
		}
		if strings.Contains(s.String(), "10.0.3.7") || strings.Contains(s.String(), "127.0.0.1") {
			t.Errorf("%s: the stream shows backend internals:\n%s", tt.tool, s)
		}
		var detail string
		for _, rec := range x.turnAudit(tt.session, 1) {
			if rec["kind"] == "afterToolCall" {
				detail, _ = rec["error"].(string)
			}
		}
		if !strings.Contains(detail, tt.detail) {
			t.Errorf("%s: audit error %q, want %q", tt.tool, detail, tt.detail)
		}
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the other origin got %d requests", n)
	}

	s := x.chat("desk", userChat("og-smuggle", "u1", "look up order https://evil.example/?q=all", nil))
	if out := outputString(t, mustToolCall(t, s, "lookup", "tool-output-available")); out != "an order id is letters, digits and dashes" {
		t.Errorf("a URL as an order id: output %q, want the rule's block reason", out)
	}

	code, body, err := x.try(http.MethodPost, "/v1/agents/desk/sessions/og-fetch/messages", map[string]any{"messages": []any{map[string]any{
		"id": "u1", "role": "user", "parts": []any{
			map[string]any{"type": "text", "text": "look at this"},
			map[string]any{"type": "file", "mediaType": "image/png", "url": "https://[64:ff9b::a9fe:a9fe]/latest/meta-data.png"},
		},
	}}})
	if err != nil || code != http.StatusBadRequest || !strings.Contains(string(body), `"code":"invalid_attachment"`) ||
		!strings.Contains(string(body), "resolves to an address that is not public") {
		t.Errorf("NAT64 metadata URL: %d %s %v, want 400 invalid_attachment naming the address", code, body, err)
	}
}
