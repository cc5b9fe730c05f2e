package celrules

import (
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/turngate/turngate/engine"
)

// The CEL object types rules see. Each wraps a pointer to the engine's own
// struct, so evaluation reads the hook context in place: nothing is copied
// or converted until an expression selects a field.
var (
	turnType       = newObjectType[engine.TurnContext]("turngate.Turn")
	stepType       = newObjectType[engine.PrepareStepContext]("turngate.Step")
	principalType  = newObjectType[engine.Principal]("turngate.Principal")
	messageType    = newObjectType[engine.ModelMessage]("turngate.Message")
	partType       = newObjectType[engine.ContentPart]("turngate.Part")
	toolType       = newObjectType[engine.ToolInfo]("turngate.Tool")
	stepResultType = newObjectType[engine.StepResult]("turngate.StepResult")
	toolCallType   = newObjectType[engine.ToolCall]("turngate.ToolCall")
	toolResultType = newObjectType[engine.ToolResult]("turngate.ToolResult")
	usageType      = newObjectType[engine.Usage]("turngate.Usage")
	stopType       = newObjectType[engine.StopCondition]("turngate.StopCondition")
	attachmentType = newObjectType[engine.Attachment]("turngate.Attachment")
	chatErrorType  = newObjectType[ChatError]("turngate.ChatError")

	objectTypes = []*objectType{turnType, stepType, principalType, messageType, partType,
		toolType, stepResultType, toolCallType, toolResultType, usageType, stopType, attachmentType, chatErrorType}

	stringListType = types.NewListType(types.StringType)
	dynMapType     = types.NewMapType(types.StringType, types.DynType)
)

func init() {
	// Field tables are filled here, not in the var block, because lists of
	// messages refer to the message type and so on (an initialisation cycle
	// for the compiler, though not at run time).
	addFields(turnType,
		field("system", types.StringType, func(t *engine.TurnContext) ref.Val { return types.String(t.System) }),
		field("messages", types.NewListType(messageType.typ), func(t *engine.TurnContext) ref.Val { return newObjectList(messageType, t.Messages) }),
		field("tools", types.NewListType(toolType.typ), func(t *engine.TurnContext) ref.Val { return newObjectList(toolType, t.Tools) }),
		field("model", types.StringType, func(t *engine.TurnContext) ref.Val { return types.String(t.Model) }),
		field("continuation", types.BoolType, func(t *engine.TurnContext) ref.Val { return types.Bool(t.Continuation) }),
		rawField("body", dynMapType, func(t *engine.TurnContext) ref.Val { return newDynMap(t.Body) },
			func(t *engine.TurnContext) any { return bodyMap(t.Body) }),
		field("agent", types.StringType, func(t *engine.TurnContext) ref.Val { return types.String(t.Agent) }),
		field("sessionId", types.StringType, func(t *engine.TurnContext) ref.Val { return types.String(t.SessionID) }),
		field("requestId", types.StringType, func(t *engine.TurnContext) ref.Val { return types.String(t.RequestID) }),
		field("entryPath", types.StringType, func(t *engine.TurnContext) ref.Val { return types.String(t.EntryPath) }),
		field("depth", types.IntType, func(t *engine.TurnContext) ref.Val { return types.Int(t.Depth) }),
		field("maxSteps", types.IntType, func(t *engine.TurnContext) ref.Val { return types.Int(t.MaxSteps) }),
		field("context", stringMapType, func(t *engine.TurnContext) ref.Val { return types.NewStringStringMap(registry, t.Context) }),
		field("compacted", types.BoolType, func(t *engine.TurnContext) ref.Val { return types.Bool(t.Compacted) }),
		field("summary", types.StringType, func(t *engine.TurnContext) ref.Val { return types.String(t.Summary) }),
		field("attachments", types.NewListType(attachmentType.typ), func(t *engine.TurnContext) ref.Val { return newObjectList(attachmentType, t.Attachments) }),
		field("deadline", types.TimestampType, func(t *engine.TurnContext) ref.Val { return types.Timestamp{Time: t.Deadline} }),
		field("aborted", types.BoolType, func(t *engine.TurnContext) ref.Val { return types.Bool(t.Aborted) }),
	)
	addFields(stepType,
		field("stepNumber", types.IntType, func(s *engine.PrepareStepContext) ref.Val { return types.Int(s.StepNumber) }),
		field("steps", types.NewListType(stepResultType.typ), func(s *engine.PrepareStepContext) ref.Val { return newObjectList(stepResultType, s.Steps) }),
		field("model", types.StringType, func(s *engine.PrepareStepContext) ref.Val { return types.String(s.Model) }),
		field("system", types.StringType, func(s *engine.PrepareStepContext) ref.Val { return types.String(s.System) }),
		field("messages", types.NewListType(messageType.typ), func(s *engine.PrepareStepContext) ref.Val { return newObjectList(messageType, s.Messages) }),
		field("activeTools", stringListType, func(s *engine.PrepareStepContext) ref.Val { return types.NewStringList(registry, s.ActiveTools) }),
	)
	addFields(principalType,
		field("tenant", types.StringType, func(p *engine.Principal) ref.Val { return types.String(p.Tenant) }),
		field("subject", types.StringType, func(p *engine.Principal) ref.Val { return types.String(p.Subject) }),
		field("roles", stringListType, func(p *engine.Principal) ref.Val { return types.NewStringList(registry, p.Roles) }),
	)
	addFields(messageType,
		field("role", types.StringType, func(m *engine.ModelMessage) ref.Val { return types.String(m.Role) }),
		field("content", types.NewListType(partType.typ), func(m *engine.ModelMessage) ref.Val { return newObjectList(partType, m.Content) }),
		field("text", types.StringType, func(m *engine.ModelMessage) ref.Val { return types.String(m.Text()) }),
	)
	addFields(partType,
		field("type", types.StringType, func(p *engine.ContentPart) ref.Val { return types.String(p.Type) }),
		field("text", types.StringType, func(p *engine.ContentPart) ref.Val { return types.String(p.Text) }),
		field("toolName", types.StringType, func(p *engine.ContentPart) ref.Val { return types.String(p.ToolName) }),
		field("toolCallId", types.StringType, func(p *engine.ContentPart) ref.Val { return types.String(p.ToolCallID) }),
		field("input", types.DynType, func(p *engine.ContentPart) ref.Val { return jsonValue(p.Input) }),
		field("output", types.DynType, func(p *engine.ContentPart) ref.Val { return jsonValue(p.Output) }),
		field("isError", types.BoolType, func(p *engine.ContentPart) ref.Val { return types.Bool(p.IsError) }),
		field("mediaType", types.StringType, func(p *engine.ContentPart) ref.Val { return types.String(p.MediaType) }),
		field("filename", types.StringType, func(p *engine.ContentPart) ref.Val { return types.String(p.Filename) }),
	)
	addFields(toolType,
		field("name", types.StringType, func(t *engine.ToolInfo) ref.Val { return types.String(t.Name) }),
		field("description", types.StringType, func(t *engine.ToolInfo) ref.Val { return types.String(t.Description) }),
		field("kind", types.StringType, func(t *engine.ToolInfo) ref.Val { return types.String(t.Kind) }),
		field("server", types.StringType, func(t *engine.ToolInfo) ref.Val { return types.String(t.Server) }),
		field("inputSchema", types.DynType, func(t *engine.ToolInfo) ref.Val { return jsonValue(t.InputSchema) }),
		field("dynamic", types.BoolType, func(t *engine.ToolInfo) ref.Val { return types.Bool(t.Dynamic) }),
	)
	addFields(stepResultType,
		field("stepNumber", types.IntType, func(s *engine.StepResult) ref.Val { return types.Int(s.StepNumber) }),
		field("model", types.StringType, func(s *engine.StepResult) ref.Val { return types.String(s.Model) }),
		field("text", types.StringType, func(s *engine.StepResult) ref.Val { return types.String(s.Text) }),
		field("reasoningText", types.StringType, func(s *engine.StepResult) ref.Val { return types.String(s.ReasoningText) }),
		field("toolCalls", types.NewListType(toolCallType.typ), func(s *engine.StepResult) ref.Val { return newObjectList(toolCallType, s.ToolCalls) }),
		field("toolResults", types.NewListType(toolResultType.typ), func(s *engine.StepResult) ref.Val { return newObjectList(toolResultType, s.ToolResults) }),
		field("finishReason", types.StringType, func(s *engine.StepResult) ref.Val { return types.String(s.FinishReason) }),
		field("usage", usageType.typ, func(s *engine.StepResult) ref.Val { return &object{usageType, &s.Usage} }),
	)
	addFields(toolCallType,
		field("toolName", types.StringType, func(c *engine.ToolCall) ref.Val { return types.String(c.ToolName) }),
		field("toolCallId", types.StringType, func(c *engine.ToolCall) ref.Val { return types.String(c.ToolCallID) }),
		field("input", types.DynType, func(c *engine.ToolCall) ref.Val { return jsonValue(c.Input) }),
		field("dynamic", types.BoolType, func(c *engine.ToolCall) ref.Val { return types.Bool(c.Dynamic) }),
	)
	addFields(toolResultType,
		field("toolName", types.StringType, func(r *engine.ToolResult) ref.Val { return types.String(r.ToolName) }),
		field("toolCallId", types.StringType, func(r *engine.ToolResult) ref.Val { return types.String(r.ToolCallID) }),
		field("input", types.DynType, func(r *engine.ToolResult) ref.Val { return jsonValue(r.Input) }),
		field("output", types.DynType, func(r *engine.ToolResult) ref.Val { return jsonValue(r.Output) }),
		field("isError", types.BoolType, func(r *engine.ToolResult) ref.Val { return types.Bool(r.IsError) }),
		field("errorText", types.StringType, func(r *engine.ToolResult) ref.Val { return types.String(r.ErrorText) }),
	)
	addFields(usageType,
		field("inputTokens", types.IntType, func(u *engine.Usage) ref.Val { return types.Int(u.InputTokens) }),
		field("outputTokens", types.IntType, func(u *engine.Usage) ref.Val { return types.Int(u.OutputTokens) }),
		field("totalTokens", types.IntType, func(u *engine.Usage) ref.Val { return types.Int(u.TotalTokens) }),
		field("reasoningTokens", types.IntType, func(u *engine.Usage) ref.Val { return types.Int(u.ReasoningTokens) }),
		field("cachedInputTokens", types.IntType, func(u *engine.Usage) ref.Val { return types.Int(u.CachedInputTokens) }),
	)
	addFields(attachmentType,
		field("mediaType", types.StringType, func(a *engine.Attachment) ref.Val { return types.String(a.MediaType) }),
		field("filename", types.StringType, func(a *engine.Attachment) ref.Val { return types.String(a.Filename) }),
		field("size", types.IntType, func(a *engine.Attachment) ref.Val { return types.Int(a.Size) }),
		field("remote", types.BoolType, func(a *engine.Attachment) ref.Val { return types.Bool(a.Remote) }),
		field("url", types.StringType, func(a *engine.Attachment) ref.Val { return types.String(a.URL) }),
	)
	addFields(chatErrorType,
		field("stage", types.StringType, func(e *ChatError) ref.Val { return types.String(e.Stage) }),
		field("class", types.StringType, func(e *ChatError) ref.Val { return types.String(e.Class) }),
		field("message", types.StringType, func(e *ChatError) ref.Val { return types.String(e.Message) }),
		field("partialMessage", types.BoolType, func(e *ChatError) ref.Val { return types.Bool(e.PartialMessage) }),
	)
	addFields(stopType,
		field("type", types.StringType, func(c *engine.StopCondition) ref.Val { return types.String(c.Type) }),
		field("count", types.IntType, func(c *engine.StopCondition) ref.Val { return types.Int(c.Count) }),
		field("toolName", types.StringType, func(c *engine.StopCondition) ref.Val { return types.String(c.ToolName) }),
	)
}

// objectType is a CEL object type backed by a Go struct of the engine.
type objectType struct {
	typ    *types.Type
	goType reflect.Type // the pointer type held by values of this type
	names  []string
	fields map[string]*objectField
}

// objectField is one field of an objectType: its CEL type and its getter,
// which takes the struct pointer and returns a CEL value. raw, when set,
// serves field selection instead of get: it may return a native Go value
// that cel-go qualifies further without adapting it first.
type objectField struct {
	name string
	typ  *types.Type
	get  func(ptr any) ref.Val
	raw  func(ptr any) any
	ft   *types.FieldType
}

func newObjectType[T any](name string) *objectType {
	return &objectType{
		typ:    types.NewObjectType(name),
		goType: reflect.TypeFor[*T](),
		fields: map[string]*objectField{},
	}
}

// field declares a field whose getter receives a *T.
func field[T any](name string, t *types.Type, get func(*T) ref.Val) *objectField {
	return &objectField{name: name, typ: t, get: func(ptr any) ref.Val { return get(ptr.(*T)) }}
}

// rawField declares a field with a native getter for field selection (see
// objectField.raw).
func rawField[T any](name string, t *types.Type, get func(*T) ref.Val, raw func(*T) any) *objectField {
	f := field(name, t, get)
	f.raw = func(ptr any) any { return raw(ptr.(*T)) }
	return f
}

func addFields(o *objectType, fs ...*objectField) {
	for _, f := range fs {
		getFrom := func(target any) (any, error) { return f.get(target), nil }
		if f.raw != nil {
			getFrom = func(target any) (any, error) { return f.raw(target), nil }
		}
		f.ft = &types.FieldType{
			Type:    f.typ,
			IsSet:   func(any) bool { return true },
			GetFrom: getFrom,
		}
		o.fields[f.name] = f
		o.names = append(o.names, f.name)
	}
}

// object is a CEL value of an objectType: a pointer into the hook context.
type object struct {
	t   *objectType
	ptr any
}

var _ traits.Indexer = (*object)(nil)

func (o *object) ConvertToNative(typeDesc reflect.Type) (any, error) {
	switch {
	case typeDesc == o.t.goType:
		return o.ptr, nil
	case typeDesc == o.t.goType.Elem():
		return reflect.ValueOf(o.ptr).Elem().Interface(), nil
	}
	return nil, fmt.Errorf("type conversion error from %s to %v", o.t.typ.TypeName(), typeDesc)
}

func (o *object) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case types.TypeType:
		return o.t.typ
	case o.t.typ:
		return o
	}
	return types.NewErr("type conversion error from %s to %s", o.t.typ.TypeName(), typeVal.TypeName())
}

func (o *object) Equal(other ref.Val) ref.Val {
	x, ok := other.(*object)
	if !ok || x.t != o.t {
		return types.False
	}
	return types.Bool(reflect.DeepEqual(o.ptr, x.ptr))
}

func (o *object) Type() ref.Type { return o.t.typ }

func (o *object) Value() any { return o.ptr }

// Get returns a field by name, for access through dyn values.
func (o *object) Get(index ref.Val) ref.Val {
	name, ok := index.(types.String)
	if !ok {
		return types.ValOrErr(index, "no such overload")
	}
	f, ok := o.t.fields[string(name)]
	if !ok {
		return types.NewErr("no such field %q on %s", name, o.t.typ.TypeName())
	}
	return f.get(o.ptr)
}

// IsSet reports whether a field exists; every declared field is always set.
func (o *object) IsSet(field ref.Val) ref.Val {
	name, ok := field.(types.String)
	if !ok {
		return types.ValOrErr(field, "no such overload")
	}
	_, ok = o.t.fields[string(name)]
	return types.Bool(ok)
}

// objectList is a CEL list over a slice of engine structs. Elements are
// wrapped on access, so a rule that only asks for size() never touches them.
type objectList[T any] struct {
	t     *objectType
	items []T
}

var _ traits.Lister = objectList[engine.ModelMessage]{}

func newObjectList[T any](t *objectType, items []T) objectList[T] {
	return objectList[T]{t: t, items: items}
}

func (l objectList[T]) elem(i int) ref.Val { return &object{l.t, &l.items[i]} }

func (l objectList[T]) vals() []ref.Val {
	vs := make([]ref.Val, len(l.items))
	for i := range l.items {
		vs[i] = l.elem(i)
	}
	return vs
}

func (l objectList[T]) ConvertToNative(typeDesc reflect.Type) (any, error) {
	if typeDesc == reflect.TypeFor[[]T]() {
		return l.items, nil
	}
	return types.NewRefValList(registry, l.vals()).ConvertToNative(typeDesc)
}

func (l objectList[T]) ConvertToType(typeVal ref.Type) ref.Val {
	switch typeVal {
	case types.ListType:
		return l
	case types.TypeType:
		return types.ListType
	}
	return types.NewErr("type conversion error from list to %s", typeVal.TypeName())
}

func (l objectList[T]) Equal(other ref.Val) ref.Val {
	return types.NewRefValList(registry, l.vals()).Equal(other)
}

func (l objectList[T]) Type() ref.Type { return types.ListType }

func (l objectList[T]) Value() any { return l.items }

func (l objectList[T]) Add(other ref.Val) ref.Val {
	if o, ok := other.(objectList[T]); ok && o.t == l.t {
		items := make([]T, 0, len(l.items)+len(o.items))
		return objectList[T]{t: l.t, items: append(append(items, l.items...), o.items...)}
	}
	return types.NewRefValList(registry, l.vals()).Add(other)
}

func (l objectList[T]) Contains(v ref.Val) ref.Val {
	for i := range l.items {
		if l.elem(i).Equal(v) == types.True {
			return types.True
		}
	}
	return types.False
}

func (l objectList[T]) Get(index ref.Val) ref.Val {
	i, err := types.IndexOrError(index)
	if err != nil {
		return types.WrapErr(err)
	}
	if i < 0 || i >= len(l.items) {
		return types.NewErr("index out of range: %d", i)
	}
	return l.elem(i)
}

func (l objectList[T]) Iterator() traits.Iterator { return &objectIter[T]{list: l} }

func (l objectList[T]) Size() ref.Val { return types.Int(len(l.items)) }

// objectIter iterates an objectList. The element values after the first
// are allocated together: a loop over n messages costs two allocations,
// not n.
type objectIter[T any] struct {
	list objectList[T]
	i    int
	objs []object
}

// The ref.Val methods of an iterator are never called by the interpreter;
// they exist to satisfy traits.Iterator, as in cel-go's own iterators.

func (it *objectIter[T]) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("type conversion on iterators not supported")
}

func (it *objectIter[T]) ConvertToType(ref.Type) ref.Val {
	return types.NewErr("no such overload")
}

func (it *objectIter[T]) Equal(ref.Val) ref.Val { return types.NewErr("no such overload") }

func (it *objectIter[T]) Type() ref.Type { return types.IteratorType }

func (it *objectIter[T]) Value() any { return nil }

func (it *objectIter[T]) HasNext() ref.Val { return types.Bool(it.i < len(it.list.items)) }

func (it *objectIter[T]) Next() ref.Val {
	if it.i >= len(it.list.items) {
		return nil
	}
	i := it.i
	it.i++
	if i == 0 {
		// cel-go's runtime type checks read only the first element.
		return it.list.elem(0)
	}
	if it.objs == nil {
		it.objs = make([]object, len(it.list.items)-1)
	}
	o := &it.objs[i-1]
	*o = object{it.list.t, &it.list.items[i]}
	return o
}

// newDynMap adapts a body map; a nil body is an empty map so that
// has(turn.body.x) is simply false.
func newDynMap(m map[string]any) ref.Val {
	if m == nil {
		m = map[string]any{}
	}
	return types.NewStringInterfaceMap(registry, m)
}

// emptyBody stands in for a nil body; it is never written.
var emptyBody = map[string]any{}

// bodyMap returns the body for field selection: a Go map, which cel-go
// reads in place (turn.body.x, has(turn.body.x)) and adapts only when the
// whole map is used as a value.
func bodyMap(m map[string]any) map[string]any {
	if m == nil {
		return emptyBody
	}
	return m
}

// jsonValue decodes a raw JSON value (tool inputs, outputs and schemas) into
// a CEL value; empty is null, and bad JSON is an evaluation error.
func jsonValue(raw json.RawMessage) ref.Val {
	if len(raw) == 0 {
		return types.NullValue
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return types.NewErr("decoding JSON value: %v", err)
	}
	return registry.NativeToValue(v)
}

// provider resolves turngate's object types and delegates everything else
// to cel-go's standard registry.
type provider struct {
	*types.Registry
	byName map[string]*objectType
}

// registry is the adapter used to build lists and maps of native values.
var registry = mustRegistry()

func mustRegistry() *types.Registry {
	r, err := types.NewRegistry()
	if err != nil {
		panic(err)
	}
	return r
}

func newProvider() *provider {
	p := &provider{Registry: mustRegistry(), byName: map[string]*objectType{}}
	for _, o := range objectTypes {
		p.byName[o.typ.TypeName()] = o
	}
	return p
}

// FindStructType implements types.Provider.
func (p *provider) FindStructType(name string) (*types.Type, bool) {
	if o, ok := p.byName[name]; ok {
		return types.NewTypeTypeWithParam(o.typ), true
	}
	return p.Registry.FindStructType(name)
}

// FindStructFieldNames implements types.Provider.
func (p *provider) FindStructFieldNames(name string) ([]string, bool) {
	if o, ok := p.byName[name]; ok {
		return o.names, true
	}
	return p.Registry.FindStructFieldNames(name)
}

// FindStructFieldType implements types.Provider.
func (p *provider) FindStructFieldType(name, fieldName string) (*types.FieldType, bool) {
	if o, ok := p.byName[name]; ok {
		f, ok := o.fields[fieldName]
		if !ok {
			return nil, false
		}
		return f.ft, true
	}
	return p.Registry.FindStructFieldType(name, fieldName)
}

// NewValue implements types.Provider. Turngate's types are read-only views
// of the hook context and cannot be constructed in expressions.
func (p *provider) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if _, ok := p.byName[name]; ok {
		return types.NewErr("%s values cannot be constructed; use the helper functions", name)
	}
	return p.Registry.NewValue(name, fields)
}

// JSONSchema returns the JSON Schema of the CEL variable named variable,
// "turn" (turngate.Turn), "step" (turngate.Step) or "error"
// (turngate.ChatError, onChatError's), derived from the type
// declarations above so that `turngate schema` and the documentation
// tables cannot drift from what rules are type-checked against. Object
// types are closed (a rule cannot select another field); dyn is any JSON.
func JSONSchema(variable string) (map[string]any, error) {
	var root *objectType
	switch variable {
	case "turn":
		root = turnType
	case "step":
		root = stepType
	case "error":
		root = chatErrorType
	default:
		return nil, fmt.Errorf("no CEL variable %q with a schema (want turn, step or error)", variable)
	}
	byName := map[string]*objectType{}
	for _, o := range objectTypes {
		byName[o.typ.TypeName()] = o
	}
	var schema func(t *types.Type) map[string]any
	schema = func(t *types.Type) map[string]any {
		switch t.Kind() {
		case types.StringKind:
			return map[string]any{"type": "string"}
		case types.IntKind:
			return map[string]any{"type": "integer"}
		case types.DoubleKind:
			return map[string]any{"type": "number"}
		case types.BoolKind:
			return map[string]any{"type": "boolean"}
		case types.TimestampKind:
			return map[string]any{"type": "string", "format": "date-time"}
		case types.ListKind:
			return map[string]any{"type": "array", "items": schema(t.Parameters()[0])}
		case types.MapKind:
			return map[string]any{"type": "object", "additionalProperties": schema(t.Parameters()[1])}
		case types.StructKind:
			o := byName[t.TypeName()]
			props := make(map[string]any, len(o.names))
			for _, n := range o.names {
				props[n] = schema(o.fields[n].typ)
			}
			return map[string]any{"title": t.TypeName(), "type": "object", "properties": props,
				"required": append([]string(nil), o.names...), "additionalProperties": false}
		}
		return map[string]any{} // dyn
	}
	s := schema(root.typ)
	s["$schema"] = "http://json-schema.org/draft-07/schema#"
	return s, nil
}
