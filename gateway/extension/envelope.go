package extension

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Version is the envelope format's version.
const Version = 1

// MaxResponseBytes bounds an extension's answer to one delivery (an HTTP
// response body or an exec stdout line): 1 MiB holds a beforeTurn result
// that replaces a long transcript, and a hostile extension cannot make the
// gateway buffer more.
const MaxResponseBytes = 1 << 20

// Envelope is one delivery to an extension: the http transport's request
// body, or one stdin line of the exec transport.
type Envelope struct {
	Version int `json:"version"`
	// ID numbers the extension's deliveries from 1, in delivery order: a
	// gap means deliveries were dropped. The exec transport's answer
	// repeats it.
	ID        uint64 `json:"id"`
	Extension string `json:"extension"`
	Hook      string `json:"hook"`
	RequestID string `json:"requestId"`
	SessionID string `json:"sessionId"`
	Agent     string `json:"agent"`
	// Deadline is when the turn's time runs out (engine.Identity's), so
	// an extension can bound its own work; absent when it has none.
	Deadline time.Time `json:"deadline,omitzero"`
	// Aborted is set when the turn's abort signal had fired as the hook
	// was called (cancelled, timed out, shutdown): the result will not be
	// used, and an observation hook reports an ending turn.
	Aborted bool `json:"aborted,omitempty"`
	// Snapshot is the hook's snapshot, for every hook but onChunk.
	Snapshot any `json:"snapshot,omitempty"`
	// Snapshots are onChunk's batch of chunk snapshots, in stream order.
	Snapshots []ChunkSnapshot `json:"snapshots,omitempty"`
}

// Response is an extension's answer, the reference's hook wire result:
// {result} | {skipped: true} | {error}. Only beforeTurn results are used;
// an empty answer (an HTTP 204, or {}) means no change.
type Response struct {
	// ID is the delivery's id (required on the exec transport).
	ID      uint64         `json:"id,omitempty"`
	Result  map[string]any `json:"result,omitempty"`
	Skipped bool           `json:"skipped,omitempty"`
	Error   string         `json:"error,omitempty"`
}

// ParseResponse decodes an extension's answer. Anything but one JSON
// object of the Response shape, at most MaxResponseBytes long, is an
// error that says what is wrong without echoing the answer.
func ParseResponse(data []byte) (*Response, error) {
	if len(data) > MaxResponseBytes {
		return nil, fmt.Errorf("answer of %d bytes exceeds the %d-byte limit", len(data), MaxResponseBytes)
	}
	var r Response
	if len(bytes.TrimSpace(data)) == 0 {
		return &r, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("answer is not a JSON object {result?, skipped?, error?, id?}: %s", jsonError(err))
	}
	if dec.More() {
		return nil, errors.New("answer has data after its JSON object")
	}
	return &r, nil
}

// jsonError names what a decoding error found, never the data.
func jsonError(err error) string {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return fmt.Sprintf("invalid JSON at byte %d", syn.Offset)
	case errors.As(err, &typ):
		return fmt.Sprintf("%s must not be a JSON %s", cmp.Or(typ.Field, "the answer"), typ.Value)
	}
	return strings.TrimPrefix(err.Error(), "json: ")
}

// settable are the TurnConfig fields an extension's beforeTurn result may
// set: the reference lets extensions set these and not model, tools,
// stopWhen or output (think-implementation.md §2.2).
var settable = []string{"system", "messages", "activeTools", "toolChoice", "maxSteps", "sendReasoning",
	"maxOutputTokens", "temperature", "topP", "topK", "presencePenalty", "frequencyPenalty", "stopSequences",
	"seed", "maxRetries", "timeout", "headers", "providerOptions"}

// forbidden are TurnConfig fields extensions cannot set.
var forbidden = []string{"model", "tools", "stopWhen", "output"}

// overrides splits a beforeTurn result into the fields an extension may
// set and an error per field it may not.
func overrides(result map[string]any) (map[string]any, []error) {
	var errs []error
	out := make(map[string]any, len(result))
	for k, v := range result {
		switch {
		case slices.Contains(settable, k):
			out[k] = v
		case slices.Contains(forbidden, k):
			errs = append(errs, fmt.Errorf("%s: extensions cannot set model, tools, stopWhen or output (ignored)", k))
		default:
			errs = append(errs, fmt.Errorf("%s: not a field extensions can set (want one of %s; ignored)", k, strings.Join(settable, ", ")))
		}
	}
	slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return out, errs
}
