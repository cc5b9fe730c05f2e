// Package celrules compiles and evaluates turngate's CEL rules: the
// beforeTurn and beforeStep hooks, and beforePersist, which masks what
// the store keeps of a message (persist.go), written by operators in YAML.
//
// # Rule files
//
//	beforeTurn:
//	  - name: cheap-model-for-continuations   # required, unique per file and hook
//	    description: optional prose
//	    when: turn.continuation               # CEL bool; omitted means always
//	    shadow: false                         # true: evaluated, never enforced
//	    set:                                  # field: CEL expression
//	      model: '"fast"'
//	beforeStep:
//	  - name: force-search-first
//	    when: step.stepNumber == 0
//	    set:
//	      activeTools: '["search"]'
//	      toolChoice: '{"type": "tool", "toolName": "search"}'
//
// Every value under set is a CEL expression, so string literals need CEL
// quotes inside the YAML quotes. Any YAML scalar style works (plain, quoted,
// | and > blocks); diagnostics point into the file either way.
//
// # Variables
//
// Variables are typed objects, so a misspelt field is a load error:
//
//   - turn (turngate.Turn): system, messages, tools, model, continuation,
//     body (map(string, dyn): the client's custom body), agent, sessionId,
//     requestId, entryPath, depth, maxSteps, deadline, aborted. In
//     beforeStep rules, the turn after beforeTurn overrides.
//   - message (beforePersist) or error (onChatError), and there, for the
//     turn's identity: agent, sessionId, requestId, deadline, aborted.
//   - step (turngate.Step, beforeStep only): stepNumber, steps, model,
//     system, messages, activeTools.
//   - principal (turngate.Principal): tenant, subject, roles.
//   - now (timestamp).
//
// A message has role, content (parts) and text (its text parts joined); a
// part has type, text, toolName, toolCallId, input, output, isError; a tool
// has name, description, kind, server, inputSchema, dynamic; a completed
// step has stepNumber, model, text, reasoningText, toolCalls {toolName,
// toolCallId, input, dynamic}, toolResults {toolName, toolCallId, input,
// output, isError, errorText}, finishReason and usage {inputTokens,
// outputTokens, totalTokens, reasoningTokens, cachedInputTokens}. Tool
// inputs, outputs and schemas are dyn (decoded JSON).
//
// # Fields
//
// beforeTurn may set model, system (string); messages (list of messages,
// or of maps shaped like the AI SDK's ModelMessage); activeTools,
// stopSequences (list(string)); toolChoice ("auto", "none", "required" or
// {"type": "tool", "toolName": …}); maxSteps, maxOutputTokens, topK,
// maxRetries, seed (int); stopWhen (a stop condition or a list of them);
// sendReasoning (bool); temperature, topP, presencePenalty,
// frequencyPenalty (double, int accepted); timeout ({"totalMs": int,
// "chunkMs": int}); headers (map(string, string)); providerOptions (map);
// output ({"schema": map, "name": string}). beforeStep may set model,
// toolChoice, activeTools, system, messages and providerOptions. tools
// cannot be set: tools need executors, which the gateway config declares.
//
// Each expression is type-checked at load against its field; a constant
// value (a literal toolChoice, timeout, …) is also validated at load.
//
// # Helpers
//
//   - hasToolCall(name), stepCountIs(n): stop conditions for stopWhen.
//     hasToolCall(step.steps, name) and stepCountIs(step.steps, n) test
//     them as predicates with the AI SDK's meaning (the last step called
//     the tool; exactly n steps are done).
//   - pruneMessages(messages, mode) and pruneMessages(messages, mode,
//     tools): the AI SDK's pruneMessages with toolCalls mode "all",
//     "before-last-message" or "before-last-N-messages", optionally only for
//     the listed tools; messages left empty are dropped.
//   - lastMessages(messages, n): the last n messages (messages.slice(-n)).
//   - textMessage(role, text): a message with one text part.
//   - cel-go's strings, lists, math, sets, encoders and regex extensions
//     (regex.replace, regex.extract, regex.extractAll).
//
// # Merge
//
// Rules run in order: files by path, then rules in file order. Each rule
// whose when holds fires; when several set one field, the values combine
// to the most restrictive whatever the order: maxSteps, maxOutputTokens and
// maxRetries take the minimum, timeout each bound's minimum, activeTools
// the intersection (sorted), toolChoice "none" wins; stopWhen conditions
// add up, and other fields take the later rule's value. Trace.SetBy names
// the rule whose value won, and Trace.Conflicts the fields two rules set
// to different values. Set.Warnings lists last-wins conflicts visible at
// load (same condition, different constants).
//
// # Shadow rules
//
// A rule with "shadow: true" is evaluated after the enforced rules, apart
// (its own deadline), and never changes the overrides: Trace.Shadow holds
// the shadow rules that fired and the overrides they would have produced.
//
// # Limits and failures
//
// Every expression is bounded before it runs, and a runaway expression is an
// error, never a hang:
//
//   - At load, cel-go estimates each expression's worst-case cost, assuming
//     strings (and dyn values) of up to 10,000 characters, lists of up to
//     1,000 messages or tools and up to 100 parts, calls or roles; over
//     Options.MaxEstimatedCost (default 10 million) the rule is rejected.
//     Comparing whole objects pairwise (sets.contains, sets.intersects,
//     sets.equivalent, distinct on messages, tools or dyn values) is charged
//     as a deep comparison per pair, so sets.contains(turn.messages,
//     turn.messages) is a load error.
//   - A loop-free expression runs each of its operations once: its work is
//     the sum its static estimate bounds, linear in the context's actual
//     size, and cel-go's runtime cost tracker could only charge an
//     operation after it had returned. It therefore runs without the
//     tracker (which would double the cost of a typical rule set) and
//     without the deadline, which only loops can notice.
//   - An expression with loops (exists, all, map, filter, …) checks for
//     cancellation every 100 iterations against the hook's deadline:
//     Options.EvalTimeout (default 100ms) or the caller's context, whichever
//     ends first. When its estimate exceeds Options.CostLimit (default 1
//     million), cel-go's runtime cost limit bounds it as well. An estimate
//     within CostLimit is a proof for contexts within the size bounds; a
//     larger context (a 50,000-message conversation) is cut off by the
//     deadline.
//   - An expression that reads no variable is evaluated once at load: its
//     value is reused by every evaluation, and if it always fails the rule
//     is rejected.
//
// A deadline or cancellation is a CodeTimeout error, a cost-limit trip
// CodeCost, any other evaluation failure CodeEval. Any of them fails the
// whole hook with a *policy.Error naming the rule id and field: the caller
// fails closed (or open, if the gateway is configured so).
package celrules
