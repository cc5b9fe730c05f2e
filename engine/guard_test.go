package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/turngate/turngate/engine"
)

// panicky is a broken provider: it panics in the method named by where,
// after streaming parts.
type panicky struct {
	where string
	parts []engine.StreamPart
}

func (p *panicky) Stream(context.Context, *engine.ModelRequest) (engine.Stream, error) {
	if p.where == "Stream" {
		panic("provider bug in Stream")
	}
	return &panickyStream{p: p, i: -1}, nil
}

type panickyStream struct {
	p *panicky
	i int
}

func (s *panickyStream) Next() bool {
	s.i++
	if s.i == len(s.p.parts) && s.p.where == "Next" {
		panic("provider bug in Next")
	}
	return s.i < len(s.p.parts)
}

func (s *panickyStream) Current() engine.StreamPart {
	if s.i == len(s.p.parts)-1 && s.p.where == "Current" {
		panic("provider bug in Current")
	}
	return s.p.parts[s.i]
}

func (s *panickyStream) Err() error {
	if s.p.where == "Err" {
		panic("provider bug in Err")
	}
	return nil
}

func (s *panickyStream) Close() error {
	if s.p.where == "Close" {
		panic("provider bug in Close")
	}
	return nil
}

// panickyResolver panics on every model name.
type panickyResolver struct{}

func (panickyResolver) Resolve(string) (engine.Provider, string, error) { panic("resolver bug") }

// TestPanickingProviderFailsTheTurn: a panic anywhere in a provider ends
// the turn with status error through the one error path (masked text,
// onChatError, onChatResponse), keeping the partial message; it never
// crashes the process.
func TestPanickingProviderFailsTheTurn(t *testing.T) {
	partial := textParts("t", "partial")[:2]
	tests := []struct {
		name   string
		where  string
		parts  []engine.StreamPart
		status string
		text   string // the message's text
		stage  string
		msg    string // onChatError's raw message
	}{
		{name: "Stream", where: "Stream", status: engine.StatusError, stage: engine.StageStream, msg: "model provider panicked in Stream: provider bug in Stream"},
		{name: "Next mid-stream", where: "Next", parts: partial, status: engine.StatusError, text: "partial", stage: engine.StageStream,
			msg: "model provider panicked in Next/Current: provider bug in Next"},
		{name: "Next at once", where: "Next", status: engine.StatusError, stage: engine.StageStream,
			msg: "model provider panicked in Next/Current: provider bug in Next"},
		{name: "Current", where: "Current", parts: partial, status: engine.StatusError, text: "", stage: engine.StageStream,
			msg: "model provider panicked in Next/Current: provider bug in Current"},
		{name: "Err", where: "Err", parts: partial, status: engine.StatusError, text: "partial", stage: engine.StageStream,
			msg: "model provider panicked in Err: provider bug in Err"},
		// A failing Close after a complete step loses nothing.
		{name: "Close", where: "Close", parts: textStep("fine").parts, status: engine.StatusCompleted, text: "fine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			h.eng = engine.New(engine.Options{Models: models{"m": &panicky{where: tt.where, parts: tt.parts}}, Logger: quiet})
			res := h.run(context.Background())
			if res.Status != tt.status {
				t.Fatalf("status %s (%q), want %s", res.Status, res.Error, tt.status)
			}
			var text string
			for _, p := range res.Message.Parts {
				text += p.Text
			}
			if text != tt.text {
				t.Errorf("message text %q, want %q", text, tt.text)
			}
			if len(h.rec.resp) != 1 || h.rec.resp[0].Status != tt.status {
				t.Errorf("onChatResponse %+v", h.rec.resp)
			}
			if tt.status == engine.StatusCompleted {
				return
			}
			if res.Error != "An error occurred." {
				t.Errorf("client-visible error %q", res.Error)
			}
			if len(h.rec.errs) != 1 || h.rec.errs[0].Stage != tt.stage || !strings.HasSuffix(h.rec.errs[0].Message, tt.msg) {
				t.Errorf("onChatError %+v, want stage %s message ending %q", h.rec.errs, tt.stage, tt.msg)
			}
			if types := h.ev.types(); types[len(types)-1] != engine.EventFinish || !slices.Contains(types, engine.EventError) {
				t.Errorf("events %q", types)
			}
		})
	}
	t.Run("resolver", func(t *testing.T) {
		h := newHarness(t, nil)
		h.eng = engine.New(engine.Options{Models: panickyResolver{}, Logger: quiet})
		res := h.run(context.Background())
		if res.Status != engine.StatusError || len(h.rec.errs) != 1 || h.rec.errs[0].Stage != engine.StageSetup ||
			!strings.Contains(h.rec.errs[0].Message, "model resolver panicked: resolver bug") {
			t.Errorf("status %s, onChatError %+v", res.Status, h.rec.errs)
		}
	})
}

// TestBeforeStepModelOverride: a beforeStep model override is used for
// that step (StepResult.Model names it); one that does not resolve fails
// the turn at the setup stage, before any model request.
func TestBeforeStepModelOverride(t *testing.T) {
	t.Run("resolves", func(t *testing.T) {
		main, other := newFake(callStep(`A={"q":"x"}`), textStep("never")), newFake(textStep("from other"))
		h := newHarness(t, main, echoTool("A"))
		h.eng = engine.New(engine.Options{Models: models{"m": main, "other": other}, Logger: quiet})
		h.rec.stepCfg = func(sc *engine.PrepareStepContext) (*engine.StepConfig, error) {
			if sc.StepNumber == 1 {
				return &engine.StepConfig{Model: ptr("other")}, nil
			}
			return nil, nil
		}
		res := h.run(context.Background())
		if res.Status != engine.StatusCompleted || len(res.Steps) != 2 {
			t.Fatalf("status %s steps %d", res.Status, len(res.Steps))
		}
		if res.Steps[0].Model != "m" || res.Steps[1].Model != "other" || other.requests()[0].Model != "up-other" {
			t.Errorf("step models %q, %q; upstream %q", res.Steps[0].Model, res.Steps[1].Model, other.requests()[0].Model)
		}
	})
	t.Run("unresolvable", func(t *testing.T) {
		fake := newFake(textStep("never"))
		h := newHarness(t, fake)
		h.rec.stepCfg = func(*engine.PrepareStepContext) (*engine.StepConfig, error) {
			return &engine.StepConfig{Model: ptr("no-such-model")}, nil
		}
		res := h.run(context.Background())
		if res.Status != engine.StatusError || len(fake.requests()) != 0 {
			t.Fatalf("status %s, %d requests", res.Status, len(fake.requests()))
		}
		if len(h.rec.errs) != 1 || h.rec.errs[0].Stage != engine.StageSetup ||
			h.rec.errs[0].Message != `beforeStep 0: resolving model "no-such-model": unknown model "no-such-model"` {
			t.Errorf("onChatError %+v", h.rec.errs)
		}
		if want := []string{"start", "error", "finish"}; !slices.Equal(h.ev.types(), want) {
			t.Errorf("events %q, want %q", h.ev.types(), want)
		}
	})
	t.Run("hook error is a policy failure", func(t *testing.T) {
		fake := newFake(textStep("never"))
		h := newHarness(t, fake)
		h.rec.stepCfg = func(*engine.PrepareStepContext) (*engine.StepConfig, error) { return nil, errors.New("rules broken") }
		res := h.run(context.Background())
		if res.Status != engine.StatusError || len(h.rec.errs) != 1 || h.rec.errs[0].Stage != engine.StagePolicy {
			t.Errorf("status %s onChatError %+v", res.Status, h.rec.errs)
		}
	})
}
