package engine_test

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/turngate/turngate/engine"
)

// TestAttachments: the rules see the files of the last user message, with
// the decoded size of inline files and remote ones marked.
func TestAttachments(t *testing.T) {
	h := newHarness(t, newFake(textStep("ok")), echoTool("search"))
	h.req.Messages = []engine.UIMessage{
		{ID: "u0", Role: engine.RoleUser, Parts: []engine.UIPart{{Type: engine.PartFile, MediaType: "image/gif", URL: "data:image/gif;base64,R0lGODlh"}}},
		{ID: "a0", Role: engine.RoleAssistant, Parts: []engine.UIPart{{Type: engine.PartText, Text: "seen"}}},
		{ID: "u1", Role: engine.RoleUser, Parts: []engine.UIPart{
			{Type: engine.PartText, Text: "and these?"},
			{Type: engine.PartFile, MediaType: "image/png", URL: "data:image/png;base64,iVBORw0KGgo=", Filename: "dot.png"},
			{Type: engine.PartFile, MediaType: "application/pdf", URL: "https://example.com/a.pdf"},
		}},
	}
	var seen []engine.Attachment
	h.rec.turn = func(tc *engine.TurnContext) (*engine.TurnConfig, error) {
		seen = tc.Attachments
		return nil, nil
	}
	h.run(context.Background())
	want := []engine.Attachment{{MediaType: "image/png", Filename: "dot.png", Size: 8},
		{MediaType: "application/pdf", Size: -1, Remote: true, URL: "https://example.com/a.pdf"}}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("turn.attachments = %+v, want %+v", seen, want)
	}
	reqs := h.fake.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d model requests", len(reqs))
	}
	last := reqs[0].Messages[len(reqs[0].Messages)-1]
	if len(last.Content) != 3 || last.Content[1].Type != engine.ContentFile || last.Content[1].URL != "data:image/png;base64,iVBORw0KGgo=" || last.Content[1].Filename != "dot.png" {
		t.Errorf("the model got %+v", last.Content)
	}
}

// TestRefusedTurn: a beforeTurn refusal ends the turn before any model
// call; the client sees the reason, onChatError the typed error.
func TestRefusedTurn(t *testing.T) {
	h := newHarness(t, newFake(textStep("never")))
	reason := "PDF files are not accepted here."
	h.rec.turn = func(*engine.TurnContext) (*engine.TurnConfig, error) {
		return &engine.TurnConfig{Refuse: &reason}, nil
	}
	res := h.run(context.Background())
	if n := len(h.fake.requests()); n != 0 {
		t.Fatalf("the model was called %d times", n)
	}
	if res.Status != engine.StatusError || res.Error != reason || res.FinishReason != engine.FinishError {
		t.Errorf("result = %s %q %s", res.Status, res.Error, res.FinishReason)
	}
	if got := h.ev.text(); got != `{"type":"start","messageId":"msg_assistant_1"}
{"type":"error","errorText":"`+reason+`"}
{"type":"finish","finishReason":"error","messageMetadata":{"interrupted":"error"}}` {
		t.Errorf("events:\n%s", got)
	}
	var re *engine.TurnRefusedError
	if len(h.rec.errs) != 1 || !errors.As(h.rec.errs[0].Err, &re) || re.Reason != reason || h.rec.errs[0].Stage != engine.StageSetup {
		t.Errorf("onChatError got %+v", h.rec.errs)
	}
}
