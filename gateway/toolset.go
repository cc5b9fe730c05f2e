package gateway

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/engine/tools"
	"github.com/turngate/turngate/engine/tools/agenttool"
	"github.com/turngate/turngate/engine/tools/mcptool"
	"github.com/turngate/turngate/gateway/config"
)

// buildTools builds the configured tools: builtins here, every other kind
// through tools.Build (sub-agent tools run through s).
func (s *Server) buildTools(cfg *config.Config, mcp *mcptool.Manager) (map[string]engine.Tool, error) {
	out := map[string]engine.Tool{}
	var rest []tools.Config
	var errs []error
	for _, t := range cfg.Tools {
		if t.Builtin == "" {
			rest = append(rest, t.Config)
			continue
		}
		ex, ok := builtins[t.Builtin]
		if !ok {
			errs = append(errs, fmt.Errorf("tool %q: unknown builtin %q", t.Name, t.Builtin))
			continue
		}
		var schema json.RawMessage
		if t.InputSchema != nil {
			raw, err := json.Marshal(t.InputSchema)
			if err != nil {
				errs = append(errs, fmt.Errorf("tool %q: inputSchema: %w", t.Name, err))
				continue
			}
			schema = raw
		} else {
			schema = tools.DefaultInputSchema
		}
		out[t.Name] = engine.Tool{
			ToolInfo: engine.ToolInfo{Name: t.Name, Description: t.Description, InputSchema: schema, Kind: engine.ToolKindBuiltin},
			Executor: ex, Timeout: t.Timeout, MaxOutputBytes: t.MaxOutputBytes,
		}
	}
	built, err := tools.Build(rest, tools.Deps{MCP: mcp, Agents: &agenttool.EngineRunner{Engine: s.engine, Template: s.subAgentTemplate, Prepare: s.prepareSubAgent}})
	if err != nil {
		errs = append(errs, err)
	}
	for _, t := range built {
		out[t.Name] = t
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("building tools: %w", err)
	}
	return out, nil
}

// agentTools returns ag's tools for one turn: configured tools, and tools
// of MCP servers as they are listed now.
func (s *Server) agentTools(ag *agent) []engine.Tool {
	out := make([]engine.Tool, 0, len(ag.toolNames))
	var listed map[string]engine.Tool
	for _, name := range ag.toolNames {
		if t, ok := s.tools[name]; ok {
			out = append(out, t)
			continue
		}
		if listed == nil && s.mcp != nil {
			listed = map[string]engine.Tool{}
			for _, t := range s.mcp.Tools() {
				listed[t.Name] = t
			}
		}
		if t, ok := listed[name]; ok {
			out = append(out, t)
		} else {
			s.log.Warn("agent tool is not available", "agent", ag.name, "tool", name)
		}
	}
	return out
}

// subAgentTemplate is the turn template of a sub-agent: its own model,
// prompt, tools and defaults, the live rules, the extensions after them
// (as on a top-level turn: an extension subscribed to beforeToolCall or
// afterToolCall sees the sub-agent's tool calls too) and the gateway's
// observers; prepareSubAgent then applies its session configuration.
// Sub-agent turns are not stored; their decisions are audited.
func (s *Server) subAgentTemplate(name string) (engine.TurnRequest, error) {
	ag, ok := s.agents()[name]
	if !ok {
		return engine.TurnRequest{}, fmt.Errorf("no agent named %q", name)
	}
	rev := s.rules.Current()
	return engine.TurnRequest{
		Model:    ag.model,
		System:   ag.system,
		Tools:    s.agentTools(ag),
		Defaults: ag.defaults,
		// The sub-agent's tool limits are the configuration's when it starts.
		ToolLimits: toolLimits(s.conf().Limits),
		Hooks:      engine.Compose(s.kill.Hooks(), s.state.Hooks(rev, s.extensions.Wrap(rev.Hooks(s.recorder, s.failurePolicy))), s.quotas.Hooks(), s.observers),
	}, nil
}

// toolLimits are a turn's tool limits from the configuration's limits,
// taken when the turn starts: a reload applies to the next turn.
func toolLimits(l config.Limits) engine.ToolLimits {
	return engine.ToolLimits{Timeout: l.ToolTimeout, MaxOutputBytes: l.MaxToolOutputBytes, MaxConcurrent: l.MaxConcurrentTools}
}
