// Package state declares the state rules read across turns: counts, sums,
// distinct values, "happened before" and "time since last", each within a
// window and a scope. Rules stay pure functions of their input: the gateway
// reads the declared values the revision's rules use before it evaluates
// them (input.state.NAME in Rego, state.NAME in CEL), and copies them into
// the decision record, so evaluation is deterministic and replay exact.
//
// A rules directory declares state in files named state.yaml or
// *.state.yaml (File kind "state" in policy/ruleset):
//
//	state:
//	  - name: emails_per_hour
//	    count: toolCalls          # what it counts: toolCalls, turns, inputTokens, outputTokens
//	    tools: [send_email]       # tool calls of these tools only (toolCalls, input.FIELD)
//	    outcomes: [executed]      # of these outcomes only (default: every outcome)
//	    by: [principal]           # scope: tenant, principal, agent, session, tool, input.FIELD
//	    within: 1h                # sliding window …
//	    resolution: 1m            # … whose start moves in steps of this (default within/60, ≥ 1s)
//	  - name: spent_today
//	    sum: input.amount         # a numeric field of the tool input, or inputTokens/outputTokens
//	    tools: [wire_transfer]
//	    by: [principal]
//	    calendar: day             # calendar window: hour, day or month …
//	    timeZone: Europe/Berlin   # … in this time zone (default UTC)
//
// The kinds are count, countDistinct (distinct values of input.FIELD),
// sum, happenedBefore ({happened, at}) and timeSinceLast (seconds; absent
// when nothing happened in the window). Package state parses and checks
// declarations (every error with file:line:col), and states the JSON
// Schema of input.state; gateway/rulestate reads and records the values.
package state
