// Package policy holds the types shared by turngate's rule packages: the
// positioned diagnostic type every rule error uses, and the decision record
// every hook evaluation yields for the audit log. It is a leaf package.
//
// The rule languages live in subpackages: celrules (CEL, beforeTurn and
// beforeStep), opa (Rego, beforeToolCall and tool results) and ruleset (a
// rules directory compiled into one immutable, hot-reloaded revision that
// implements engine.Hooks).
package policy
