package celrules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/turngate/turngate/engine"
)

// library declares turngate's helper functions: what the reference's
// TypeScript examples do with the AI SDK (stop conditions, pruneMessages,
// slicing the last messages).
func library() cel.EnvOption {
	stepList := types.NewListType(stepResultType.typ)
	return cel.Lib(helperLib{opts: []cel.EnvOption{
		cel.Function("hasToolCall",
			cel.Overload("hasToolCall_string", []*cel.Type{cel.StringType}, stopType.typ,
				cel.UnaryBinding(func(name ref.Val) ref.Val {
					return &object{stopType, &engine.StopCondition{Type: engine.StopHasToolCall, ToolName: string(name.(types.String))}}
				})),
			cel.Overload("hasToolCall_steps_string", []*cel.Type{stepList, cel.StringType}, cel.BoolType,
				cel.BinaryBinding(func(steps, name ref.Val) ref.Val {
					return stepsMatch(steps, engine.StopCondition{Type: engine.StopHasToolCall, ToolName: string(name.(types.String))})
				}))),
		cel.Function("stepCountIs",
			cel.Overload("stepCountIs_int", []*cel.Type{cel.IntType}, stopType.typ,
				cel.UnaryBinding(func(n ref.Val) ref.Val {
					if n.(types.Int) < 0 {
						return types.NewErr("stepCountIs: count %d is negative", n)
					}
					return &object{stopType, &engine.StopCondition{Type: engine.StopStepCount, Count: int(n.(types.Int))}}
				})),
			cel.Overload("stepCountIs_steps_int", []*cel.Type{stepList, cel.IntType}, cel.BoolType,
				cel.BinaryBinding(func(steps, n ref.Val) ref.Val {
					return stepsMatch(steps, engine.StopCondition{Type: engine.StopStepCount, Count: int(n.(types.Int))})
				}))),
		cel.Function("pruneMessages",
			cel.Overload("pruneMessages_messages_string", []*cel.Type{messageListType, cel.StringType}, messageListType,
				cel.BinaryBinding(func(msgs, mode ref.Val) ref.Val {
					return pruneBinding(msgs, mode, nil)
				})),
			cel.Overload("pruneMessages_messages_string_list", []*cel.Type{messageListType, cel.StringType, stringListType}, messageListType,
				cel.FunctionBinding(func(args ...ref.Val) ref.Val {
					tools, err := decodeStringList(args[2])
					if err != nil {
						return types.NewErr("pruneMessages: tools: %v", err)
					}
					return pruneBinding(args[0], args[1], tools.([]string))
				}))),
		cel.Function("lastMessages",
			cel.Overload("lastMessages_messages_int", []*cel.Type{messageListType, cel.IntType}, messageListType,
				cel.BinaryBinding(func(msgs, n ref.Val) ref.Val {
					m, err := messagesOf(msgs)
					if err != nil {
						return types.NewErr("lastMessages: %v", err)
					}
					return newObjectList(messageType, lastMessages(m, int(n.(types.Int))))
				}))),
		cel.Function("textMessage",
			cel.Overload("textMessage_string_string", []*cel.Type{cel.StringType, cel.StringType}, messageType.typ,
				cel.BinaryBinding(func(role, text ref.Val) ref.Val {
					r := string(role.(types.String))
					switch r {
					case engine.RoleSystem, engine.RoleUser, engine.RoleAssistant:
					default:
						return types.NewErr("textMessage: role %q is not system, user or assistant", r)
					}
					return &object{messageType, &engine.ModelMessage{Role: r, Content: []engine.ContentPart{{Type: engine.ContentText, Text: string(text.(types.String))}}}}
				}))),
	}})
}

// helperLib adapts a list of declarations to cel.Library.
type helperLib struct{ opts []cel.EnvOption }

func (l helperLib) CompileOptions() []cel.EnvOption     { return l.opts }
func (l helperLib) ProgramOptions() []cel.ProgramOption { return nil }

// stepsMatch evaluates a stop condition over completed steps with the AI
// SDK's semantics: stepCountIs(n) matches when exactly n steps are done,
// hasToolCall(name) when the last step called the tool.
func stepsMatch(v ref.Val, c engine.StopCondition) ref.Val {
	l, ok := v.(objectList[engine.StepResult])
	if !ok {
		return types.NewErr("%s: want step.steps, got %s", c.Type, typeName(v))
	}
	return types.Bool(stopMatches(c, l.items))
}

func stopMatches(c engine.StopCondition, steps []engine.StepResult) bool {
	switch c.Type {
	case engine.StopStepCount:
		return len(steps) == c.Count
	case engine.StopHasToolCall:
		if len(steps) == 0 {
			return false
		}
		for _, tc := range steps[len(steps)-1].ToolCalls {
			if tc.ToolName == c.ToolName {
				return true
			}
		}
	}
	return false
}

func pruneBinding(msgs, mode ref.Val, tools []string) ref.Val {
	m, err := messagesOf(msgs)
	if err != nil {
		return types.NewErr("pruneMessages: %v", err)
	}
	keep, err := parsePruneMode(string(mode.(types.String)))
	if err != nil {
		return types.NewErr("pruneMessages: %v", err)
	}
	return newObjectList(messageType, pruneMessages(m, keep, tools))
}

// parsePruneMode reads the AI SDK's toolCalls modes: "all",
// "before-last-message" and "before-last-N-messages". It returns how many
// trailing messages keep their tool content; -1 means none ("all").
func parsePruneMode(mode string) (int, error) {
	switch mode {
	case "all":
		return -1, nil
	case "before-last-message":
		return 1, nil
	}
	if n, ok := strings.CutPrefix(mode, "before-last-"); ok {
		if n, ok := strings.CutSuffix(n, "-messages"); ok {
			if k, err := strconv.Atoi(n); err == nil && k >= 0 {
				return k, nil
			}
		}
	}
	return 0, fmt.Errorf(`mode %q is not "all", "before-last-message" or "before-last-N-messages"`, mode)
}

// pruneMessages is the AI SDK's pruneMessages with toolCalls set (and
// emptyMessages "remove"): in assistant and tool messages before the last
// keep messages, tool-call and tool-result parts are removed — only those
// of the listed tools when tools is non-nil — unless their call id also
// appears in the kept messages; messages left empty are dropped. keep < 0
// prunes every message. The input is not modified.
func pruneMessages(msgs []engine.ModelMessage, keep int, tools []string) []engine.ModelMessage {
	start := len(msgs) // first message whose tool content is kept
	if keep >= 0 {
		start = max(len(msgs)-keep, 0)
	}
	kept := map[string]bool{}
	for _, m := range msgs[start:] {
		if m.Role != engine.RoleAssistant && m.Role != engine.RoleTool {
			continue
		}
		for _, p := range m.Content {
			if isToolPart(p) {
				kept[p.ToolCallID] = true
			}
		}
	}
	out := make([]engine.ModelMessage, 0, len(msgs))
	for i, m := range msgs {
		if i < start && (m.Role == engine.RoleAssistant || m.Role == engine.RoleTool) {
			var content []engine.ContentPart
			for _, p := range m.Content {
				if !isToolPart(p) || kept[p.ToolCallID] || (tools != nil && !slices.Contains(tools, p.ToolName)) {
					content = append(content, p)
				}
			}
			m.Content = content
		}
		if len(m.Content) > 0 {
			out = append(out, m)
		}
	}
	return out
}

func isToolPart(p engine.ContentPart) bool {
	return p.Type == engine.ContentToolCall || p.Type == engine.ContentToolResult
}

// lastMessages is messages.slice(-n): the last n messages, all of them when
// there are fewer, none for n <= 0.
func lastMessages(msgs []engine.ModelMessage, n int) []engine.ModelMessage {
	if n <= 0 {
		return nil
	}
	return msgs[max(len(msgs)-n, 0):]
}
