package anthropic

import (
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/turngate/turngate/engine"
	js "github.com/turngate/turngate/gateway/jsonshape"
)

func keep(p engine.UIPart, _ string) (engine.UIPart, error) { return p, nil }

// TestDecodeHistory: a request of every block kind becomes the UI history
// the engine runs: system text, files, signed reasoning, a tool call
// completed by its result.
func TestDecodeHistory(t *testing.T) {
	req, err := Decode([]byte(`{"model":"demo","max_tokens":64,"system":[{"type":"text","text":"Be brief."}],
	 "tools":[{"name":"confirm","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"confirm"},
	 "messages":[
	  {"role":"user","content":[{"type":"text","text":"Look:"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw=="}},
	    {"type":"document","title":"notes","source":{"type":"text","media_type":"text/plain","data":"hello"}}]},
	  {"role":"assistant","content":[{"type":"thinking","thinking":"Hm.","signature":"sig"},{"type":"tool_use","id":"toolu_1","name":"confirm","input":{"q":1}}]},
	  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"yes"}]}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	h, err := req.History(keep)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(h)
	want := `[{"id":"msg_system","role":"system","parts":[{"type":"text","text":"Be brief."}]},` +
		`{"id":"msg_0","role":"user","parts":[{"type":"text","text":"Look:"},{"type":"file","mediaType":"image/png","url":"data:image/png;base64,iVBORw=="},` +
		`{"type":"file","mediaType":"text/plain","url":"data:text/plain;base64,aGVsbG8=","filename":"notes"}]},` +
		`{"id":"msg_1","role":"assistant","parts":[{"type":"step-start"},{"type":"reasoning","text":"Hm.","state":"done","providerMetadata":{"anthropic":{"signature":"sig"}}},` +
		`{"type":"tool-confirm","state":"output-available","toolCallId":"toolu_1","input":{"q":1},"output":"yes"}]}]`
	if string(got) != want {
		t.Errorf("history\n%s\nwant\n%s", got, want)
	}
	tools, choice, err := req.ClientTools([]string{"weather"})
	if err != nil || len(tools) != 1 || tools[0].Kind != engine.ToolKindClient || choice.Type != engine.ToolChoiceTool || choice.ToolName != "confirm" {
		t.Errorf("tools %+v, choice %+v, %v", tools, choice, err)
	}
}

// FuzzDecode: no body panics the decoder or the conversion, and every
// refusal is a JSON error, ErrBody or a violation naming its path.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"t","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a","is_error":true,"content":"x"}]}]}`,
		`{"model":"m","max_tokens":1,"tool_choice":{"type":"any"},"tools":[{"name":"t","input_schema":{}}],"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/a.png"}}]}]}`,
		`{"max_token":1}`, `[]`, `{"model":"m"} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		req, err := Decode(data)
		if err != nil {
			var fe *js.Error
			var se *json.SyntaxError
			var ue *json.UnmarshalTypeError
			if !errors.As(err, &fe) && !errors.Is(err, ErrBody) && !errors.As(err, &se) && !errors.As(err, &ue) && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("%q: unexpected error %T %v", data, err, err)
			}
			if fe != nil && fe.Message == "" {
				t.Fatalf("%q: a violation without a message", data)
			}
			return
		}
		if _, err := req.History(keep); err != nil {
			if _, ok := err.(*js.Error); !ok {
				t.Fatalf("%q: History: %T %v", data, err, err)
			}
		}
		_, _, _ = req.ClientTools(nil)
	})
}
