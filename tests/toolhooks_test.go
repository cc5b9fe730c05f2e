package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/coder/websocket"
)

// No tool skips the hooks (rules/README.md, beforeToolCall): see
// TestToolHooksEveryKindEveryPath.

// toolHookKinds are the rows: one kind of tool each, the tool the scripted
// model calls when the user says "use <tool>".
var toolHookKinds = []struct {
	kind, tool string
	// sub is the tool the sub-agent (agent helper) calls in its own turn.
	sub string
	// client: the client runs the tool and sends its result back.
	client bool
	// session: one of the gateway's own tools, offered on stored sessions.
	session bool
	// output is what the model's answer quotes of the result.
	output string
}{
	{kind: "builtin", tool: "weather", output: `"city":"Paris"`},
	{kind: "http", tool: "lookup", output: `{"city":"Paris","temp":21}`},
	{kind: "mcp", tool: "files_read", output: "contents of /notes.txt from files"},
	{kind: "mcp", tool: "local_read", output: "contents of /notes.txt from local"},
	{kind: "agent", tool: "ask_helper", sub: "lookup", output: `The lookup tool returned: {"city":"Oslo","temp":21}`},
	{kind: "client", tool: "confirm", client: true, output: "yes"},
	{kind: "context", tool: "update_context", session: true, output: `"stored":true`},
	{kind: "context", tool: "search_history", session: true, output: "use [search]_[history]"},
}

// The documented exclusions: the combinations that do not exist or are
// not run, and why.
// (A client tool's result sent back on a stateless path is no exclusion:
// the request that brings it runs toolResult and afterToolCall over it.)
//
// excludeSessionTools: update_context and search_history work on the
// session's stored context blocks and messages; a stateless request
// (OpenAI, Anthropic) has none, so they are not offered there.
const excludeSessionTools = "not offered on a stateless path: it has no stored session"

// excludeContinue: a continuation's last user text is the engine's
// continue prompt, not "use <tool>", so the scripted model (its continue
// rule) calls the builtin and the HTTP tool only; the other kinds run the
// same stored-session turn on saveMessages.
const excludeContinue = "continueLastTurn's scripted model calls only the builtin and the HTTP tool"

// hookTurn is what the test sees of one turn: its request id, the model's
// text and the client tool call it ended with, if any.
type hookTurn struct {
	requestID string
	text      string
	// messageID is the assistant message a stored session continues.
	messageID string
	// callID names the pending client call ("" when none).
	callID string
	// history is a stateless request's messages so far, its answer included.
	history []map[string]any
}

// hookPath is one entry path: how to run a turn on it, and how the client
// sends a client tool's result back.
type hookPath struct {
	name string
	// entry is the entry path the rules see (the continuation's is
	// toolResult on stored sessions).
	entry     string
	stateless bool
	turn      func(t *testing.T, session, requestID, prompt string) hookTurn
	answer    func(t *testing.T, session, requestID string, prev hookTurn, output string) hookTurn
}

// extensionLog is an http extension: it records every delivery.
type extensionLog struct {
	URL string
	mu  sync.Mutex
	got []extensionDelivery
}

// extensionDelivery is the part of an envelope the test reads.
type extensionDelivery struct {
	ID        uint64 `json:"id"`
	Hook      string `json:"hook"`
	RequestID string `json:"requestId"`
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent"`
	Snapshot  struct {
		ToolName string `json:"toolName"`
	} `json:"snapshot"`
}

func startExtensionLog(t *testing.T) *extensionLog {
	t.Helper()
	x := &extensionLog{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var d extensionDelivery
		if err := json.NewDecoder(r.Body).Decode(&d); err != nil {
			http.Error(w, "bad envelope", http.StatusBadRequest)
			return
		}
		x.mu.Lock()
		x.got = append(x.got, d)
		x.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(srv.Close)
	x.URL = srv.URL + "/hook"
	return x
}

// find returns the delivery of hook for tool in a request of ids by agent.
func (x *extensionLog) find(hook, tool, agent string, ids ...string) (extensionDelivery, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, d := range x.got {
		if d.Hook == hook && d.Snapshot.ToolName == tool && d.Agent == agent && slices.Contains(ids, d.RequestID) {
			return d, true
		}
	}
	return extensionDelivery{}, false
}

// last returns the id of the last delivery received.
func (x *extensionLog) last() uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	if len(x.got) == 0 {
		return 0
	}
	return x.got[len(x.got)-1].ID
}

// TestToolHooksEveryKindEveryPath calls every kind of tool on every entry
// path of the gateway of testdata/toolhooks and finds each call in
// beforeToolCall's decision record (naming the tool's kind, with the entry
// path in its input), in toolResult's decision record, in the
// afterToolCall record and in both deliveries of an extension subscribed
// to beforeToolCall and afterToolCall; a sub-agent's own call too. A client
// tool's result is found in the request that sends it back: a continuation
// on the stored paths, the next request's history on the stateless ones.
// The combination that does not exist is asserted as such
// (excludeSessionTools says why); continueLastTurn covers the builtin and
// the HTTP tool (excludeContinue says why).
func TestToolHooksEveryKindEveryPath(t *testing.T) {
	ext := startExtensionLog(t)
	x := startToolsOn(t, "toolhooks", "TURNGATE_TEST_EXT_URL="+ext.URL, "TURNGATE_TEST_EXT_SECRET=toolhooks-secret-0123456789")
	g := x.g
	ws := &hooksWS{url: "ws" + strings.TrimPrefix(g.URL, "http") + "/v1/agents/hooks/ws"}
	// continueTools are the tools the continue path's row calls.
	continueTools := []string{"weather", "lookup"}
	paths := []hookPath{
		{name: "ui stream", entry: "chat", turn: g.hookChatTurn, answer: g.hookChatAnswer},
		{name: "websocket", entry: "chat", turn: ws.turn, answer: ws.answer},
		// A submission's pending client call is answered over POST chat:
		// a submission carries user messages, not tool results.
		{name: "submission", entry: "submitMessages", turn: g.hookSubmissionTurn, answer: g.hookChatAnswer},
		// saveMessages and continueLastTurn answer a pending client call
		// over POST chat likewise.
		{name: "saveMessages", entry: "saveMessages", turn: g.hookSaveTurn, answer: g.hookChatAnswer},
		{name: "continue", entry: "continueLastTurn", turn: g.hookContinueTurn, answer: g.hookChatAnswer},
		{name: "openai", entry: "openai", stateless: true, turn: g.hookOpenAITurn, answer: g.hookOpenAIAnswer},
		{name: "anthropic", entry: "anthropic", stateless: true, turn: g.hookAnthropicTurn, answer: g.hookAnthropicAnswer},
	}
	n := 0
	for _, p := range paths {
		for _, k := range toolHookKinds {
			t.Run(p.name+"/"+k.tool, func(t *testing.T) {
				n++
				session, rid := fmt.Sprintf("hooks-%d", n), fmt.Sprintf("req_hooks_%d", n)
				if p.stateless && k.session {
					toolHookExclusion(t, excludeSessionTools)
					turn := p.turn(t, session, rid, "use "+k.tool)
					if want := fmt.Sprintf("(I would call the %q tool, but it is not offered.)", k.tool); !strings.Contains(turn.text, want) {
						t.Errorf("the answer %q does not say %s is not offered", turn.text, k.tool)
					}
					g.waitTurnRecord(t, turn.requestID)
					g.noRecord(t, "beforeToolCall", k.tool, turn.requestID)
					return
				}
				if p.entry == "continueLastTurn" && !slices.Contains(continueTools, k.tool) {
					toolHookExclusion(t, excludeContinue)
					return
				}
				turn := p.turn(t, session, rid, "use "+k.tool)
				wantRecords(t, g, ext, "beforeToolCall", k.tool, "hooks", p.entry, k.kind, turn.requestID)
				if k.client {
					if turn.callID == "" {
						t.Fatalf("the turn did not end with a pending %s call: %q", k.tool, turn.text)
					}
					// The request that sends the result back runs the
					// result's hooks, on every path.
					turn = p.answer(t, session, rid+"_answer", turn, "yes")
				}
				if want := "The " + k.tool + " tool returned: "; !strings.Contains(turn.text, want) || !strings.Contains(turn.text, k.output) {
					t.Errorf("the answer %q does not show the model saw the %s result (%q)", turn.text, k.tool, k.output)
				}
				wantRecords(t, g, ext, "afterToolCall", k.tool, "hooks", "", "", turn.requestID)
				if k.sub != "" {
					wantRecords(t, g, ext, "beforeToolCall", k.sub, "helper", "subAgent", "http", turn.requestID)
					wantRecords(t, g, ext, "afterToolCall", k.sub, "helper", "", "", turn.requestID)
				}
			})
		}
	}
}

// toolHookExclusion logs why a combination is asserted as absent.
func toolHookExclusion(t *testing.T, why string) {
	t.Helper()
	t.Logf("documented exclusion: %s", why)
}

// wantRecords waits for the records one hook leaves of agent's call of
// tool in the requests ids: the audit record (a beforeToolCall decision
// record naming the tool's kind and the entry path of its input; for
// afterToolCall, the toolResult decision record and the afterToolCall
// record) and the extension's delivery.
func wantRecords(t *testing.T, g *gateway, ext *extensionLog, hook, tool, agent, entry, kind string, ids ...string) {
	t.Helper()
	record := func(hook string) map[string]any {
		t.Helper()
		return awaitRecord(t, g, hook+" of "+tool, func(rec map[string]any) bool {
			id, _ := rec["requestId"].(string)
			return (rec["hook"] == hook || rec["kind"] == hook) && rec["toolName"] == tool && rec["agent"] == agent && slices.Contains(ids, id)
		})
	}
	if hook == "beforeToolCall" {
		rec := record(hook)
		input, _ := rec["input"].(map[string]any)
		if rec["outcome"] != "no_match" || rec["toolKind"] != kind || input["entryPath"] != entry {
			t.Errorf("decision record %v: want outcome no_match, toolKind %s, input.entryPath %s", rec, kind, entry)
		}
	} else {
		if rec := record("toolResult"); rec["outcome"] != "no_match" {
			t.Errorf("toolResult decision record %v: want outcome no_match", rec)
		}
		if rec := record(hook); rec["success"] != true {
			t.Errorf("afterToolCall record %v: want success", rec)
		}
	}
	poll(t, "the extension's "+hook+" delivery of "+tool, func() error {
		if _, ok := ext.find(hook, tool, agent, ids...); !ok {
			return fmt.Errorf("none among %d deliveries", ext.last())
		}
		return nil
	})
}

// awaitRecord polls g's audit log until a record matches and returns it,
// failing t when none does.
func awaitRecord(t *testing.T, g *gateway, what string, match func(rec map[string]any) bool) map[string]any {
	t.Helper()
	var found map[string]any
	poll(t, "an audit record for "+what, func() error {
		recs := g.auditRecords()
		for _, rec := range recs {
			if match(rec) {
				found = rec
				return nil
			}
		}
		return fmt.Errorf("none among %d records", len(recs))
	})
	return found
}

// waitTurnRecord waits for the turn record of requestID: the records its
// hooks handed over are written before it.
func (g *gateway) waitTurnRecord(t *testing.T, requestID string) {
	t.Helper()
	awaitRecord(t, g, "the turn of "+requestID, func(rec map[string]any) bool {
		return rec["kind"] == "turn" && rec["requestId"] == requestID
	})
}

// noRecord fails if the audit log holds a record of hook for tool in one
// of the requests ids.
func (g *gateway) noRecord(t *testing.T, hook, tool string, ids ...string) {
	t.Helper()
	for _, rec := range g.auditRecords() {
		id, _ := rec["requestId"].(string)
		if (rec["hook"] == hook || rec["kind"] == hook) && rec["toolName"] == tool && slices.Contains(ids, id) {
			t.Errorf("unexpected %s record: %v", hook, rec)
		}
	}
}

// post sends a JSON body with headers (name, value pairs) and returns the
// response, closed when the test ends.
func (g *gateway) post(t *testing.T, path string, body any, headers ...string) *http.Response {
	t.Helper()
	data, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, g.URL+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// postJSON posts body and decodes a 200 answer into out.
func (g *gateway) postJSON(t *testing.T, path string, body, out any, headers ...string) {
	t.Helper()
	resp := g.post(t, path, body, headers...)
	data, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST %s: status %d (%v): %s", path, resp.StatusCode, err, data)
	}
	if err := json.Unmarshal(data, out); err != nil {
		t.Fatalf("POST %s: decoding %s: %v", path, data, err)
	}
}

// streamTurn is the hookTurn of a UI message stream.
func streamTurn(t *testing.T, requestID string, s *uiStream) hookTurn {
	t.Helper()
	turn := hookTurn{requestID: requestID, text: s.text(), messageID: s.messageID()}
	if tc, ok := s.toolCall("confirm"); ok && s.finishReason() == "tool-calls" {
		turn.callID = tc.ID
	}
	return turn
}

// hookChatTurn runs prompt over POST chat.
func (g *gateway) hookChatTurn(t *testing.T, session, requestID, prompt string) hookTurn {
	t.Helper()
	return g.hookChat(t, requestID, userChat(session, "u1", prompt, nil))
}

func (g *gateway) hookChat(t *testing.T, requestID string, body chatBody, known ...string) hookTurn {
	t.Helper()
	resp := g.post(t, "/v1/agents/hooks/chat", body, "X-Request-Id", requestID)
	checkStreamResponse(t, resp)
	s, err := readUIStream(resp.Body, known...)
	if err != nil {
		t.Fatalf("UI message stream: %v\n%s", err, s)
	}
	return streamTurn(t, requestID, s)
}

// clientAnswer is the chat body that answers the pending confirm call of
// prev with output: the stored assistant message with the call's output.
func clientAnswer(session string, prev hookTurn, output string) chatBody {
	return chatBody{"id": session, "trigger": "submit-message", "messages": []map[string]any{
		{"id": prev.messageID, "role": "assistant", "parts": []map[string]any{{"type": "tool-confirm", "toolCallId": prev.callID,
			"state": "output-available", "input": map[string]any{"question": "Proceed?"}, "output": output}}},
	}}
}

// hookChatAnswer answers the pending call over POST chat.
func (g *gateway) hookChatAnswer(t *testing.T, session, requestID string, prev hookTurn, output string) hookTurn {
	t.Helper()
	return g.hookChat(t, requestID, clientAnswer(session, prev, output), prev.callID)
}

// hookSubmissionTurn runs prompt as a durable submission and waits for it.
func (g *gateway) hookSubmissionTurn(t *testing.T, session, _, prompt string) hookTurn {
	t.Helper()
	var accepted submission
	g.postJSON(t, "/v1/agents/hooks/sessions/"+session+"/messages", map[string]any{"text": prompt, "async": true}, &accepted)
	done := waitCompleted(t, g.sub(t), "hooks", session, accepted.SubmissionID)
	return resultTurn(t, done.Result)
}

// hookSaveTurn runs prompt over synchronous saveMessages.
func (g *gateway) hookSaveTurn(t *testing.T, session, requestID, prompt string) hookTurn {
	t.Helper()
	var res json.RawMessage
	g.postJSON(t, "/v1/agents/hooks/sessions/"+session+"/messages", map[string]any{"text": prompt}, &res, "X-Request-Id", requestID)
	return resultTurn(t, res)
}

// hookContinueTurn stores a finished turn of prompt (saveMessages, its
// client call answered over POST chat), then continues its assistant
// message over continueLastTurn: the scripted model answers the same user
// text, so the continuation calls the tool again.
func (g *gateway) hookContinueTurn(t *testing.T, session, requestID, prompt string) hookTurn {
	t.Helper()
	if first := g.hookSaveTurn(t, session, requestID+"_first", prompt); first.callID != "" {
		g.hookChatAnswer(t, session, requestID+"_first_answer", first, "yes")
	}
	var res json.RawMessage
	g.postJSON(t, "/v1/agents/hooks/sessions/"+session+"/continue", map[string]any{}, &res, "X-Request-Id", requestID)
	return resultTurn(t, res)
}

// resultTurn is the hookTurn of a turn's JSON result (saveMessages', a
// submission's).
func resultTurn(t *testing.T, data json.RawMessage) hookTurn {
	t.Helper()
	var res struct {
		RequestID string `json:"requestId"`
		Message   struct {
			ID    string `json:"id"`
			Parts []struct {
				Type, Text, State, ToolCallID string
			} `json:"parts"`
		} `json:"message"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		t.Fatalf("turn result %s: %v", data, err)
	}
	turn := hookTurn{requestID: res.RequestID, messageID: res.Message.ID}
	for _, p := range res.Message.Parts {
		turn.text += p.Text
		if p.Type == "tool-confirm" && p.State == "input-available" {
			turn.callID = p.ToolCallID
		}
	}
	return turn
}

// hookOpenAITurn runs prompt on POST /v1/chat/completions.
func (g *gateway) hookOpenAITurn(t *testing.T, _, requestID, prompt string) hookTurn {
	t.Helper()
	return g.hookOpenAI(t, requestID, []map[string]any{{"role": "user", "content": prompt}})
}

func (g *gateway) hookOpenAI(t *testing.T, requestID string, msgs []map[string]any) hookTurn {
	t.Helper()
	var res struct {
		Choices []struct {
			Message struct {
				Content   string           `json:"content"`
				ToolCalls []map[string]any `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
	}
	g.postJSON(t, "/v1/chat/completions", map[string]any{"model": "hooks", "messages": msgs}, &res, "X-Request-Id", requestID)
	if len(res.Choices) != 1 {
		t.Fatalf("%d choices", len(res.Choices))
	}
	m := res.Choices[0].Message
	turn := hookTurn{requestID: requestID, text: m.Content}
	assistant := map[string]any{"role": "assistant", "content": m.Content}
	if len(m.ToolCalls) > 0 {
		turn.callID, _ = m.ToolCalls[0]["id"].(string)
		assistant["tool_calls"] = m.ToolCalls
	}
	turn.history = append(slices.Clone(msgs), assistant)
	return turn
}

// hookOpenAIAnswer sends the history with the tool message of the call.
func (g *gateway) hookOpenAIAnswer(t *testing.T, _, requestID string, prev hookTurn, output string) hookTurn {
	t.Helper()
	return g.hookOpenAI(t, requestID, append(prev.history, map[string]any{"role": "tool", "tool_call_id": prev.callID, "content": output}))
}

// hookAnthropicTurn runs prompt on POST /v1/messages.
func (g *gateway) hookAnthropicTurn(t *testing.T, _, requestID, prompt string) hookTurn {
	t.Helper()
	return g.hookAnthropic(t, requestID, []map[string]any{{"role": "user", "content": prompt}})
}

func (g *gateway) hookAnthropic(t *testing.T, requestID string, msgs []map[string]any) hookTurn {
	t.Helper()
	var res struct {
		Content []map[string]any `json:"content"`
	}
	g.postJSON(t, "/v1/messages", map[string]any{"model": "hooks", "max_tokens": 1024, "messages": msgs}, &res,
		"X-Request-Id", requestID, "anthropic-version", "2023-06-01")
	turn := hookTurn{requestID: requestID}
	for _, b := range res.Content {
		switch b["type"] {
		case "text":
			s, _ := b["text"].(string)
			turn.text += s
		case "tool_use":
			turn.callID, _ = b["id"].(string)
		}
	}
	turn.history = append(slices.Clone(msgs), map[string]any{"role": "assistant", "content": res.Content})
	return turn
}

// hookAnthropicAnswer sends the history with the call's tool_result.
func (g *gateway) hookAnthropicAnswer(t *testing.T, _, requestID string, prev hookTurn, output string) hookTurn {
	t.Helper()
	return g.hookAnthropic(t, requestID, append(prev.history, map[string]any{"role": "user", "content": []map[string]any{
		{"type": "tool_result", "tool_use_id": prev.callID, "content": output}}}))
}

// hooksWS sends the test's requests over the WebSocket of agent hooks, a
// connection each (the test reads none between its requests, so a
// connection kept open would miss the gateway's pings).
type hooksWS struct {
	url string
}

func (w *hooksWS) turn(t *testing.T, session, requestID, prompt string) hookTurn {
	t.Helper()
	return w.send(t, requestID, userChat(session, "u1", prompt, nil))
}

func (w *hooksWS) answer(t *testing.T, session, requestID string, prev hookTurn, output string) hookTurn {
	t.Helper()
	return w.send(t, requestID, clientAnswer(session, prev, output), prev.callID)
}

// send sends body as a send frame and reads its chunks up to its end.
func (w *hooksWS) send(t *testing.T, requestID string, body chatBody, known ...string) hookTurn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	frame := map[string]any{"type": "send", "requestId": requestID, "headers": map[string]string{"x-request-id": requestID}}
	for k, v := range body {
		frame[k] = v
	}
	data, err := json.Marshal(frame)
	if err != nil {
		t.Fatal(err)
	}
	conn, _, err := websocket.Dial(ctx, w.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.CloseNow()
	if err := conn.Write(ctx, websocket.MessageText, data); err != nil {
		t.Fatal(err)
	}
	checker := newUIChecker(known...)
	var chunks []chunk
	for {
		_, data, err := conn.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			Type, RequestID, ErrorText string
			Chunk                      json.RawMessage
		}
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("frame %s: %v", data, err)
		}
		switch f.Type {
		case "error":
			t.Fatalf("request %s failed: %s", f.RequestID, f.ErrorText)
		case "chunk":
			if c, ok := checker.add(string(f.Chunk)); ok {
				chunks = append(chunks, c)
			}
		case "end":
			checker.add("[DONE]")
			s := &uiStream{Chunks: chunks}
			if err := checker.end(); err != nil {
				t.Fatalf("chunks over the WebSocket: %v\n%s", err, s)
			}
			return streamTurn(t, requestID, s)
		}
	}
}
