// Package rules holds turngate's default rule set: the files of this
// directory (CEL *.yaml, Rego *.rego, data and tests), which the gateway
// loads out of the box. README.md is the rule author's guide.
//
// FS embeds the files, so a binary started without a rules directory can
// serve the defaults with ruleset.LoadFS(rules.FS, "rules", opts).
package rules

import "embed"

// FS is the default rule set, tests included, and README.md, the rule
// author's guide (the loader ignores it; `turngate init` writes it out).
//
//go:embed *.yaml *.rego README.md
var FS embed.FS
