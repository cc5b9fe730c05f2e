package opa

import (
	"maps"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
)

// networkBuiltins reach the network. They are refused unless
// Options.AllowNetwork is set. The other net.* builtins (net.cidr_contains,
// net.cidr_merge, …) are pure computations on addresses, safe and useful
// for allow-lists, so they stay available.
var networkBuiltins = map[string]string{
	ast.HTTPSend.Name:        "network builtins are disabled in the policy sandbox",
	ast.NetLookupIPAddr.Name: "network builtins are disabled in the policy sandbox",
}

// leakyBuiltins expose the gateway process. They are always refused.
var leakyBuiltins = map[string]string{
	ast.OPARuntime.Name: "it exposes the gateway's environment and configuration",
}

var sandboxForbidden = func() map[string]string {
	m := maps.Clone(networkBuiltins)
	maps.Copy(m, leakyBuiltins)
	return m
}()

// forbiddenBuiltins maps each builtin the sandbox refuses to the reason its
// diagnostic gives.
func forbiddenBuiltins(opts Options) map[string]string {
	if opts.AllowNetwork {
		return leakyBuiltins
	}
	return sandboxForbidden
}

// capabilities returns this OPA version's capabilities without the builtins
// opts forbids, so neither the compiler nor the evaluator can reach them.
func capabilities(opts Options) *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	forbidden := forbiddenBuiltins(opts)
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(bi *ast.Builtin) bool {
		_, no := forbidden[bi.Name]
		return no
	})
	// An empty allow-list also stops the type checker fetching remote schemas.
	caps.AllowNet = []string{}
	return caps
}
