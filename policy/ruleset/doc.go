// Package ruleset compiles a rules directory into one immutable Revision and
// keeps the live revision current as the directory changes.
//
// A directory holds CEL rule files (beforeTurn, beforeStep), Rego policies
// (beforeToolCall, tool results), data documents and the tests of both. Load
// reads it (non-recursively) and compiles the CEL and Rego parts together; a
// Revision is identified by the sha256 of its files and implements
// engine.Hooks for one turn through Revision.Hooks.
//
// A Manager holds the live Revision behind an atomic pointer: a turn takes
// Current once and uses that revision for every hook, while Reload and Watch
// build a new one beside it and swap it in whole. A candidate that fails to
// compile is rejected; the last good revision keeps serving and the errors are
// kept for Status.
package ruleset
