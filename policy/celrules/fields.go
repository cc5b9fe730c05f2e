package celrules

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// fieldSpec is one field a rule can set: the CEL types its expression may
// have, how a value is decoded and validated, and where it goes in the
// hook's config. step is nil for fields beforeStep cannot set.
type fieldSpec struct {
	name   string
	want   []*types.Type // accepted static types; dyn is always accepted
	decode func(ref.Val) (any, error)
	turn   func(c *engine.TurnConfig, v any)
	step   func(c *engine.StepConfig, v any)
	// copies says turn and step copy the decoded value (a scalar, a value
	// struct, a cloned list, appended elements), so a constant decoded once
	// at load can serve every evaluation. Fields stored as they are (maps,
	// messages) decode afresh each time.
	copies bool
	// merge says how values from several rules combine (merge.go).
	merge mergeKind
	// keys are an object field's keys (its Go type's JSON names), so that
	// a map literal's misspelt constant key is a load error even when a
	// value reads the context (compiler.checkKeys).
	keys []string
}

// jsonKeys returns the JSON names of struct v's fields.
func jsonKeys(v any) []string {
	t := reflect.TypeOf(v)
	keys := make([]string, 0, t.NumField())
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		keys = append(keys, name)
	}
	return keys
}

// wantString renders the accepted types for "must be …" messages.
func (f *fieldSpec) wantString() string {
	names := make([]string, len(f.want))
	for i, t := range f.want {
		names[i] = t.String()
	}
	return strings.Join(names, " or ")
}

// accepts reports whether an expression of static type t may set the field.
// dyn (and containers of dyn) pass here and are checked when evaluated.
func (f *fieldSpec) accepts(t *types.Type) bool {
	for _, w := range f.want {
		if assignable(w, t) {
			return true
		}
	}
	return false
}

// assignable is IsAssignableType with dyn anywhere in got accepted: "[]"
// is list(dyn), and turn.body.x is dyn.
func assignable(want, got *types.Type) bool {
	if got.Kind() == types.DynKind || want.IsAssignableType(got) {
		return true
	}
	wp, gp := want.Parameters(), got.Parameters()
	if want.Kind() != got.Kind() || len(wp) == 0 || len(wp) != len(gp) {
		return false
	}
	for i := range wp {
		if !assignable(wp[i], gp[i]) {
			return false
		}
	}
	return true
}

// toolsFieldError is why rules cannot set tools: a tool needs an executor,
// which only the gateway configuration can provide.
const toolsFieldError = "field tools cannot be set from CEL rules: tools need executors, which only the gateway configuration declares; offer them there and narrow them with activeTools"

var (
	messageListType = types.NewListType(messageType.typ)
	mapListType     = types.NewListType(dynMapType)
	intMapType      = types.NewMapType(types.StringType, types.IntType)
	boolMapType     = types.NewMapType(types.StringType, types.BoolType)
	stringMapType   = types.NewMapType(types.StringType, types.StringType)
	stopListType    = types.NewListType(stopType.typ)
)

// fields is every settable field by name, in TurnConfig order.
var fields = map[string]*fieldSpec{}

// fieldOrder lists field names in TurnConfig order for messages.
var fieldOrder []string

func init() {
	add := func(f *fieldSpec) {
		fields[f.name] = f
		fieldOrder = append(fieldOrder, f.name)
	}
	add(&fieldSpec{name: "model", want: []*types.Type{types.StringType}, decode: decodeString,
		turn: func(c *engine.TurnConfig, v any) { c.Model = ptr(v.(string)) },
		step: func(c *engine.StepConfig, v any) { c.Model = ptr(v.(string)) }})
	add(&fieldSpec{name: "system", want: []*types.Type{types.StringType}, decode: decodeString,
		turn: func(c *engine.TurnConfig, v any) { c.System = ptr(v.(string)) },
		step: func(c *engine.StepConfig, v any) { c.System = ptr(v.(string)) }})
	add(&fieldSpec{name: "messages", want: []*types.Type{messageListType, mapListType}, decode: decodeMessages,
		turn: func(c *engine.TurnConfig, v any) { c.Messages = ptr(v.([]engine.ModelMessage)) },
		step: func(c *engine.StepConfig, v any) { c.Messages = ptr(v.([]engine.ModelMessage)) }})
	add(&fieldSpec{name: "tools"})
	add(&fieldSpec{name: "activeTools", want: []*types.Type{stringListType}, decode: decodeStringList,
		turn: func(c *engine.TurnConfig, v any) { c.ActiveTools = ptr(slices.Clone(v.([]string))) },
		step: func(c *engine.StepConfig, v any) { c.ActiveTools = ptr(slices.Clone(v.([]string))) }})
	add(&fieldSpec{name: "toolChoice", want: []*types.Type{types.StringType, dynMapType}, decode: decodeToolChoice, keys: jsonKeys(engine.ToolChoice{}),
		turn: func(c *engine.TurnConfig, v any) { c.ToolChoice = ptr(v.(engine.ToolChoice)) },
		step: func(c *engine.StepConfig, v any) { c.ToolChoice = ptr(v.(engine.ToolChoice)) }})
	add(&fieldSpec{name: "maxSteps", want: []*types.Type{types.IntType}, decode: decodeIntMin(1),
		turn: func(c *engine.TurnConfig, v any) { c.MaxSteps = ptr(int(v.(int64))) }})
	add(&fieldSpec{name: "stopWhen", want: []*types.Type{stopType.typ, stopListType}, decode: decodeStopWhen,
		turn: func(c *engine.TurnConfig, v any) { c.StopWhen = append(c.StopWhen, v.([]engine.StopCondition)...) }})
	add(&fieldSpec{name: "sendReasoning", want: []*types.Type{types.BoolType}, decode: decodeBool,
		turn: func(c *engine.TurnConfig, v any) { c.SendReasoning = ptr(v.(bool)) }})
	add(&fieldSpec{name: "maxOutputTokens", want: []*types.Type{types.IntType}, decode: decodeIntMin(1),
		turn: func(c *engine.TurnConfig, v any) { c.MaxOutputTokens = ptr(int(v.(int64))) }})
	add(&fieldSpec{name: "temperature", want: []*types.Type{types.DoubleType, types.IntType}, decode: decodeDouble,
		turn: func(c *engine.TurnConfig, v any) { c.Temperature = ptr(v.(float64)) }})
	add(&fieldSpec{name: "topP", want: []*types.Type{types.DoubleType, types.IntType}, decode: decodeDouble,
		turn: func(c *engine.TurnConfig, v any) { c.TopP = ptr(v.(float64)) }})
	add(&fieldSpec{name: "topK", want: []*types.Type{types.IntType}, decode: decodeIntMin(1),
		turn: func(c *engine.TurnConfig, v any) { c.TopK = ptr(int(v.(int64))) }})
	add(&fieldSpec{name: "presencePenalty", want: []*types.Type{types.DoubleType, types.IntType}, decode: decodeDouble,
		turn: func(c *engine.TurnConfig, v any) { c.PresencePenalty = ptr(v.(float64)) }})
	add(&fieldSpec{name: "frequencyPenalty", want: []*types.Type{types.DoubleType, types.IntType}, decode: decodeDouble,
		turn: func(c *engine.TurnConfig, v any) { c.FrequencyPenalty = ptr(v.(float64)) }})
	add(&fieldSpec{name: "stopSequences", want: []*types.Type{stringListType}, decode: decodeStringList,
		turn: func(c *engine.TurnConfig, v any) { c.StopSequences = ptr(slices.Clone(v.([]string))) }})
	add(&fieldSpec{name: "seed", want: []*types.Type{types.IntType}, decode: decodeInt,
		turn: func(c *engine.TurnConfig, v any) { c.Seed = ptr(v.(int64)) }})
	add(&fieldSpec{name: "maxRetries", want: []*types.Type{types.IntType}, decode: decodeIntMin(0),
		turn: func(c *engine.TurnConfig, v any) { c.MaxRetries = ptr(int(v.(int64))) }})
	add(&fieldSpec{name: "timeout", want: []*types.Type{intMapType}, decode: decodeTimeout, keys: jsonKeys(engine.TimeoutConfig{}),
		turn: func(c *engine.TurnConfig, v any) { c.Timeout = ptr(v.(engine.TimeoutConfig)) }})
	add(&fieldSpec{name: "headers", want: []*types.Type{stringMapType}, decode: decodeHeaders,
		turn: func(c *engine.TurnConfig, v any) { c.Headers = v.(map[string]string) }})
	add(&fieldSpec{name: "providerOptions", want: []*types.Type{dynMapType}, decode: decodeObject,
		turn: func(c *engine.TurnConfig, v any) { c.ProviderOptions = v.(map[string]any) },
		step: func(c *engine.StepConfig, v any) { c.ProviderOptions = v.(map[string]any) }})
	add(&fieldSpec{name: "output", want: []*types.Type{dynMapType}, decode: decodeOutput, keys: jsonKeys(engine.OutputSpec{}),
		turn: func(c *engine.TurnConfig, v any) { c.Output = ptr(v.(engine.OutputSpec)) }})
	add(&fieldSpec{name: "telemetry", want: []*types.Type{boolMapType}, decode: decodeTelemetry, keys: jsonKeys(engine.TelemetryConfig{}),
		turn: func(c *engine.TurnConfig, v any) { c.Telemetry = ptr(v.(engine.TelemetryConfig)) }})
	add(&fieldSpec{name: "refuse", want: []*types.Type{types.StringType}, decode: decodeReason,
		turn: func(c *engine.TurnConfig, v any) { c.Refuse = ptr(v.(string)) }})
	for _, name := range []string{"model", "system", "activeTools", "toolChoice", "maxSteps", "stopWhen", "sendReasoning",
		"maxOutputTokens", "temperature", "topP", "topK", "presencePenalty", "frequencyPenalty", "stopSequences",
		"seed", "maxRetries", "timeout", "telemetry", "refuse"} {
		fields[name].copies = true
	}
	for name, m := range map[string]mergeKind{"maxSteps": mergeMin, "maxOutputTokens": mergeMin, "maxRetries": mergeMin,
		"timeout": mergeTimeout, "activeTools": mergeIntersect, "toolChoice": mergeNoneWins, "stopWhen": mergeAppend} {
		fields[name].merge = m
	}
}

// fieldNames lists the fields a hook accepts, for "unknown field" messages.
func fieldNames(hook string) string {
	switch hook {
	case policy.HookBeforePersist:
		return strings.Join(persistFieldOrder, ", ")
	case policy.HookOnChatError:
		return "message"
	}
	var names []string
	for _, n := range fieldOrder {
		if f := fields[n]; n != "tools" && (hook != policy.HookBeforeStep || f.step != nil) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// fieldFor returns the field hook's rules may set under name, nil when
// there is none.
func fieldFor(hook, name string) *fieldSpec {
	switch hook {
	case policy.HookBeforePersist:
		return persistFields[name]
	case policy.HookOnChatError:
		return errorFields[name]
	}
	f := fields[name]
	if f == nil || (hook == policy.HookBeforeStep && f.step == nil) {
		return nil
	}
	return f
}

func ptr[T any](v T) *T { return &v }

func decodeString(v ref.Val) (any, error) {
	s, ok := v.(types.String)
	if !ok {
		return nil, fmt.Errorf("want string, got %s", typeName(v))
	}
	return string(s), nil
}

// decodeReason decodes refuse: a non-empty reason.
func decodeReason(v ref.Val) (any, error) {
	s, err := decodeString(v)
	if err == nil && strings.TrimSpace(s.(string)) == "" {
		return nil, fmt.Errorf("refuse needs a non-empty reason")
	}
	return s, err
}

func decodeBool(v ref.Val) (any, error) {
	b, ok := v.(types.Bool)
	if !ok {
		return nil, fmt.Errorf("want bool, got %s", typeName(v))
	}
	return bool(b), nil
}

// decodeInt accepts ints, and whole doubles (JSON numbers from the body).
func decodeInt(v ref.Val) (any, error) {
	switch n := v.(type) {
	case types.Int:
		return int64(n), nil
	case types.Uint:
		if uint64(n) <= math.MaxInt64 {
			return int64(n), nil
		}
	case types.Double:
		if f := float64(n); f == math.Trunc(f) && math.Abs(f) < 1<<53 {
			return int64(f), nil
		}
	}
	return nil, fmt.Errorf("want int, got %s", typeName(v))
}

func decodeIntMin(min int64) func(ref.Val) (any, error) {
	return func(v ref.Val) (any, error) {
		n, err := decodeInt(v)
		if err != nil {
			return nil, err
		}
		if n.(int64) < min || n.(int64) > math.MaxInt32 {
			return nil, fmt.Errorf("%d is out of range (want %d to %d)", n, min, math.MaxInt32)
		}
		return n, nil
	}
}

func decodeDouble(v ref.Val) (any, error) {
	switch n := v.(type) {
	case types.Double:
		return float64(n), nil
	case types.Int:
		return float64(n), nil
	case types.Uint:
		return float64(n), nil
	}
	return nil, fmt.Errorf("want double, got %s", typeName(v))
}

func decodeStringList(v ref.Val) (any, error) {
	l, ok := v.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("want list(string), got %s", typeName(v))
	}
	out := make([]string, 0, int(l.Size().(types.Int)))
	for it := l.Iterator(); it.HasNext() == types.True; {
		e := it.Next()
		s, ok := e.(types.String)
		if !ok {
			return nil, fmt.Errorf("want list(string), got an element of type %s", typeName(e))
		}
		out = append(out, string(s))
	}
	return out, nil
}

// decodeMessages accepts a list of messages from the context (or the
// helpers), or of maps shaped like the AI SDK's ModelMessage.
func decodeMessages(v ref.Val) (any, error) {
	msgs, err := messagesOf(v)
	if err != nil {
		return nil, err
	}
	return slices.Clone(msgs), nil
}

// messagesOf reads a CEL list of messages without copying when it is a view
// of the hook context.
func messagesOf(v ref.Val) ([]engine.ModelMessage, error) {
	switch l := v.(type) {
	case objectList[engine.ModelMessage]:
		return l.items, nil
	case traits.Lister:
		out := make([]engine.ModelMessage, 0, int(l.Size().(types.Int)))
		for it := l.Iterator(); it.HasNext() == types.True; {
			m, err := messageOf(it.Next())
			if err != nil {
				return nil, fmt.Errorf("message %d: %w", len(out), err)
			}
			out = append(out, m)
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of messages, got %s", typeName(v))
}

func messageOf(v ref.Val) (engine.ModelMessage, error) {
	if o, ok := v.(*object); ok && o.t == messageType {
		return *o.ptr.(*engine.ModelMessage), nil
	}
	var m engine.ModelMessage
	if err := decodeJSONInto(v, &m); err != nil {
		return m, err
	}
	switch m.Role {
	case engine.RoleSystem, engine.RoleUser, engine.RoleAssistant, engine.RoleTool:
	default:
		return m, fmt.Errorf("role %q is not system, user, assistant or tool", m.Role)
	}
	return m, nil
}

// decodeJSONInto converts a CEL value to JSON and decodes it strictly into
// dst, so misspelt keys in map literals are errors.
func decodeJSONInto(v ref.Val, dst any) error {
	n, err := toJSON(v)
	if err != nil {
		return err
	}
	data, err := json.Marshal(n)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	return dec.Decode(dst)
}

func decodeToolChoice(v ref.Val) (any, error) {
	if s, ok := v.(types.String); ok {
		switch string(s) {
		case engine.ToolChoiceAuto, engine.ToolChoiceNone, engine.ToolChoiceRequired:
			return engine.ToolChoice{Type: string(s)}, nil
		}
		return nil, fmt.Errorf(`%q is not a tool choice (want "auto", "none", "required" or {"type": "tool", "toolName": …})`, string(s))
	}
	var tc engine.ToolChoice
	if err := decodeJSONInto(v, &tc); err != nil {
		return nil, fmt.Errorf(`want "auto", "none", "required" or {"type": "tool", "toolName": …}: %w`, err)
	}
	switch {
	case tc.Type == engine.ToolChoiceTool && tc.ToolName == "":
		return nil, fmt.Errorf(`a tool choice of type "tool" needs a toolName`)
	case tc.Type == engine.ToolChoiceTool:
	case tc.Type == engine.ToolChoiceAuto || tc.Type == engine.ToolChoiceNone || tc.Type == engine.ToolChoiceRequired:
		if tc.ToolName != "" {
			return nil, fmt.Errorf("toolName is only allowed with type \"tool\"")
		}
	default:
		return nil, fmt.Errorf(`%q is not a tool choice type (want "auto", "none", "required" or "tool")`, tc.Type)
	}
	return tc, nil
}

// decodeStopWhen accepts one stop condition or a list of them.
func decodeStopWhen(v ref.Val) (any, error) {
	if o, ok := v.(*object); ok && o.t == stopType {
		return []engine.StopCondition{*o.ptr.(*engine.StopCondition)}, nil
	}
	l, ok := v.(traits.Lister)
	if !ok {
		return nil, fmt.Errorf("want a stop condition such as hasToolCall(\"name\") or a list of them, got %s", typeName(v))
	}
	var out []engine.StopCondition
	for it := l.Iterator(); it.HasNext() == types.True; {
		e := it.Next()
		o, ok := e.(*object)
		if !ok || o.t != stopType {
			return nil, fmt.Errorf("want stop conditions built with hasToolCall or stepCountIs, got %s", typeName(e))
		}
		out = append(out, *o.ptr.(*engine.StopCondition))
	}
	return out, nil
}

func decodeTimeout(v ref.Val) (any, error) {
	var t engine.TimeoutConfig
	if err := decodeJSONInto(v, &t); err != nil {
		return nil, fmt.Errorf("want {\"totalMs\": int, \"chunkMs\": int}: %w", err)
	}
	if t.TotalMs < 0 || t.ChunkMs < 0 {
		return nil, fmt.Errorf("timeouts must not be negative")
	}
	return t, nil
}

// decodeTelemetry reads {recordInputs?: bool, recordOutputs?: bool}.
func decodeTelemetry(v ref.Val) (any, error) {
	var c engine.TelemetryConfig
	if err := decodeJSONInto(v, &c); err != nil {
		return nil, fmt.Errorf("want {\"recordInputs\": bool, \"recordOutputs\": bool}: %w", err)
	}
	return c, nil
}

func decodeHeaders(v ref.Val) (any, error) {
	var h map[string]string
	if err := decodeJSONInto(v, &h); err != nil {
		return nil, fmt.Errorf("want map(string, string): %w", err)
	}
	return h, nil
}

func decodeObject(v ref.Val) (any, error) {
	n, err := toJSON(v)
	if err != nil {
		return nil, err
	}
	m, ok := n.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("want a map, got %s", typeName(v))
	}
	return m, nil
}

// decodeOutput reads {schema: map, name?: string}: a JSON Schema the final
// answer must validate against.
func decodeOutput(v ref.Val) (any, error) {
	var spec struct {
		Name   string         `json:"name"`
		Schema map[string]any `json:"schema"`
	}
	if err := decodeJSONInto(v, &spec); err != nil {
		return nil, fmt.Errorf("want {\"schema\": map, \"name\"?: string}: %w", err)
	}
	if spec.Schema == nil {
		return nil, fmt.Errorf("output needs a schema")
	}
	schema, err := json.Marshal(spec.Schema)
	if err != nil {
		return nil, err
	}
	return engine.OutputSpec{Name: spec.Name, Schema: schema}, nil
}

// toJSON converts a CEL value into plain Go values that encoding/json
// marshals: maps need string keys; objects become their engine structs.
func toJSON(v ref.Val) (any, error) {
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return uint64(x), nil
	case types.Double:
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("%v cannot be represented in JSON", float64(x))
		}
		return float64(x), nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(x), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return x.Duration.String(), nil
	case *object:
		return x.ptr, nil
	case traits.Mapper:
		out := map[string]any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("map keys must be strings, got %s", typeName(k))
			}
			e, err := toJSON(x.Get(k))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", string(ks), err)
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		out := make([]any, 0, int(x.Size().(types.Int)))
		for it := x.Iterator(); it.HasNext() == types.True; {
			e, err := toJSON(it.Next())
			if err != nil {
				return nil, fmt.Errorf("[%d]: %w", len(out), err)
			}
			out = append(out, e)
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s value cannot be represented in JSON", typeName(v))
}

func typeName(v ref.Val) string {
	if v == nil {
		return "nothing"
	}
	return v.Type().TypeName()
}

// configFields renders the fields a config sets as JSON-ready values, in
// name order. Tests and the dry-run use it to compare and print results.
func configFields(cfg any) map[string]any {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil
	}
	var out map[string]any
	if json.Unmarshal(data, &out) != nil {
		return nil
	}
	// ToolChoice marshals as {"type": "auto"}; rules and tests write "auto".
	if tc, ok := out["toolChoice"].(map[string]any); ok && tc["type"] != engine.ToolChoiceTool {
		out["toolChoice"] = tc["type"]
	}
	return out
}

// sortedKeys returns a map's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
