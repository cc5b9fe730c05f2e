// Package opa embeds OPA's Rego evaluator for turngate's tool-call rules.
//
// Compile turns a revision's Rego modules and data documents into a Policy:
// every module is parsed as Rego v1 (keyed by its file path, so OPA's
// locations name the file), compiled against sandboxed capabilities, and the
// two decision queries, data.turngate.tool_call and data.turngate.tool_result,
// are prepared once. A Policy is immutable and evaluates concurrently.
//
// The tool-call decision document composes across files:
//
//	block contains reason         any member → blocked; the model sees the reasons
//	substitute := {"output": …}   not executed; the model sees output
//	approval contains reason      held until a person approves (string: the
//	                              chat user; {"reason", "approvers": ["role:NAME"]}:
//	                              a principal holding one of the roles)
//	patch contains op             executed with the RFC 6902-patched input
//	(nothing)                     allowed unchanged
//
// Precedence is block > substitute > approval > patch > allow; an approval
// asks about the patched input. Every failure (an
// evaluation error, a conflict, the deadline, an undefined or malformed
// decision) is returned as a *policy.Error so the caller can fail closed.
//
// The tool-result document (patch and redact over the tool's output) lets a
// compliance team change what the model sees after a tool ran. INPUT.md in
// this directory documents both input documents field by field.
package opa
