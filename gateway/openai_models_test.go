package gateway

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/gateway/config"
)

// TestOpenAIModels: GET /v1/models lists, and GET /v1/models/{model}
// finds, exactly the agents POST /v1/chat/completions accepts as model,
// with the caller's authentication, in OpenAI's shapes and headers.
func TestOpenAIModels(t *testing.T) {
	const acmeKey, globexKey = "acme-key-0001", "globex-key-0001"
	keyed := func(c *config.Config) {
		c.Auth.APIKeys = []config.APIKey{
			{Key: acmeKey, Tenant: "acme", Subject: "alice"},
			{Key: globexKey, Tenant: "globex", Subject: "bob"},
		}
	}
	// An agent name with a slash, as "team/model" pickers show it.
	slashed := func(c *config.Config) {
		a := c.Agents[0]
		a.Name = "team/helper"
		c.Agents = append(c.Agents, a)
	}
	base := []string{"boss", "demo", "other", "slow"}
	open := newTestGateway(t, "basic", slashed)
	keyedGW := newTestGateway(t, "basic", keyed)

	tests := []struct {
		name   string
		g      *testGateway
		key    string
		path   string
		status int
		// list is the model ids of a list answer, model the id of a
		// retrieve answer, code the OpenAI error code.
		list  []string
		model string
		code  string
	}{
		{name: "open mode lists every agent", g: open, path: "/v1/models", status: 200, list: append(slices.Clone(base), "team/helper")},
		{name: "open mode retrieves one", g: open, path: "/v1/models/demo", status: 200, model: "demo"},
		{name: "a slash sent as %2F", g: open, path: "/v1/models/" + url.PathEscape("team/helper"), status: 200, model: "team/helper"},
		{name: "a slash sent as is", g: open, path: "/v1/models/team/helper", status: 200, model: "team/helper"},
		{name: "unknown model", g: open, path: "/v1/models/gpt-4o", status: 404, code: "model_not_found"},
		{name: "empty model", g: open, path: "/v1/models/", status: 404, code: "model_not_found"},
		{name: "keyed: tenant acme", g: keyedGW, key: acmeKey, path: "/v1/models", status: 200, list: base},
		{name: "keyed: tenant globex", g: keyedGW, key: globexKey, path: "/v1/models", status: 200, list: base},
		{name: "keyed: globex retrieves", g: keyedGW, key: globexKey, path: "/v1/models/other", status: 200, model: "other"},
		{name: "keyed: unknown model", g: keyedGW, key: acmeKey, path: "/v1/models/nope", status: 404, code: "model_not_found"},
		{name: "keyed: no key lists nothing", g: keyedGW, path: "/v1/models", status: 401, code: CodeUnauthorized},
		{name: "keyed: no key retrieves nothing", g: keyedGW, path: "/v1/models/demo", status: 401, code: CodeUnauthorized},
		{name: "keyed: a wrong key", g: keyedGW, key: "wrong-key-0001", path: "/v1/models/demo", status: 401, code: CodeUnauthorized},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var headers []string
			if tc.key != "" {
				headers = bearer(tc.key)
			}
			resp := tc.g.do("GET", tc.path, nil, headers...)
			defer resp.Body.Close()
			data, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.status, data)
			}
			for h, want := range map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Content-Type": "application/json; charset=utf-8"} {
				if got := resp.Header.Get(h); got != want {
					t.Errorf("%s: %q, want %q", h, got, want)
				}
			}
			switch {
			case tc.code != "":
				var e struct {
					Error struct{ Message, Type, Code string } `json:"error"`
				}
				if err := json.Unmarshal(data, &e); err != nil || e.Error.Code != tc.code || e.Error.Message == "" || e.Error.Type == "" {
					t.Errorf("error body %s (%v), want OpenAI's error with code %s", data, err, tc.code)
				}
			case tc.list != nil:
				var l struct {
					Object string     `json:"object"`
					Data   []oaiModel `json:"data"`
				}
				if err := json.Unmarshal(data, &l); err != nil || l.Object != "list" {
					t.Fatalf("list body %s (%v)", data, err)
				}
				var ids []string
				for _, m := range l.Data {
					ids = append(ids, m.ID)
					if m != newOAIModel(m.ID) {
						t.Errorf("model %+v, want object model, created 0, owned_by turngate", m)
					}
				}
				if !slices.Equal(ids, tc.list) {
					t.Errorf("ids %q, want %q", ids, tc.list)
				}
			default:
				var m map[string]any
				if err := json.Unmarshal(data, &m); err != nil {
					t.Fatal(err)
				}
				want := map[string]any{"id": tc.model, "object": "model", "created": 0.0, "owned_by": "turngate"}
				if !maps.Equal(m, want) {
					t.Errorf("model %v, want %v", m, want)
				}
			}
		})
	}

	// chat/completions resolves its model the same way: each listed model
	// gets past the model check (to the missing messages' 400) and an
	// unknown one is the same 404.
	for _, model := range append(slices.Clone(base), "team/helper") {
		var e struct {
			Error struct{ Message, Code string } `json:"error"`
		}
		open.doJSON("POST", "/v1/chat/completions", map[string]any{"model": model, "messages": []any{}}, http.StatusBadRequest, &e)
		if e.Error.Code != "invalid_request" || !strings.Contains(e.Error.Message, "messages") {
			t.Errorf("chat/completions with listed model %q: %+v, want the messages error", model, e)
		}
	}
	var e struct {
		Error struct{ Code string } `json:"error"`
	}
	keyedGW.doJSON("POST", "/v1/chat/completions", map[string]any{"model": "nope", "messages": []any{}}, http.StatusNotFound, &e, bearer(globexKey)...)
	if e.Error.Code != "model_not_found" {
		t.Errorf("chat/completions with an unlisted model: %+v", e)
	}
}
