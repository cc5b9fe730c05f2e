package celrules

import (
	"fmt"

	"gopkg.in/yaml.v3"

	"github.com/turngate/turngate/policy"
)

// ruleSpec is one parsed, not yet compiled rule.
type ruleSpec struct {
	hook        string
	name        string
	description string
	node        *yaml.Node // the rule's mapping, for errors about the whole rule
	when        *yaml.Node // nil means always
	shadow      bool
	sets        []setSpec
}

// setSpec is one entry of a rule's set map.
type setSpec struct {
	field string
	key   *yaml.Node // the field name, for unknown-field errors
	expr  *yaml.Node // the CEL expression scalar
}

// parseRules reads a rule file into rule specs, reporting every structural
// problem it finds with its position.
func parseRules(src *source) ([]*ruleSpec, policy.Errors) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src.data, &doc); err != nil {
		return nil, policy.Errors{src.parseError(err)}
	}
	if doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, nil // an empty file has no rules
	}
	root := doc.Content[0]
	if root.Kind != yaml.MappingNode {
		return nil, policy.Errors{src.nodeError(policy.CodeSchema, root,
			"a rule file must be a mapping with beforeTurn, beforeStep, beforePersist and/or onChatError lists")}
	}
	var (
		rules []*ruleSpec
		errs  policy.Errors
	)
	seenHooks := map[string]bool{}
	for i := 0; i+1 < len(root.Content); i += 2 {
		key, val := root.Content[i], root.Content[i+1]
		hook := key.Value
		if hook != policy.HookBeforeTurn && hook != policy.HookBeforeStep && hook != policy.HookBeforePersist && hook != policy.HookOnChatError {
			errs = append(errs, src.nodeError(policy.CodeSchema, key,
				fmt.Sprintf("unknown top-level key %q (want beforeTurn, beforeStep, beforePersist or onChatError)", hook)))
			continue
		}
		if seenHooks[hook] {
			errs = append(errs, src.nodeError(policy.CodeSchema, key, fmt.Sprintf("duplicate key %q", hook)))
			continue
		}
		seenHooks[hook] = true
		if val.Kind == yaml.ScalarNode && val.Tag == "!!null" {
			continue // "beforeTurn:" with nothing under it
		}
		if val.Kind != yaml.SequenceNode {
			errs = append(errs, src.nodeError(policy.CodeSchema, val, hook+" must be a list of rules"))
			continue
		}
		names := map[string]*yaml.Node{}
		for _, rn := range val.Content {
			r, rerrs := parseRule(src, hook, rn)
			errs = append(errs, rerrs...)
			if r == nil {
				continue
			}
			if first, dup := names[r.name]; dup {
				errs = append(errs, src.nodeError(policy.CodeSchema, nameNode(rn),
					fmt.Sprintf("duplicate rule name %q in %s (first defined on line %d)", r.name, hook, first.Line)))
				continue
			}
			names[r.name] = nameNode(rn)
			// A rule with schema errors is still compiled, so its CEL
			// errors are reported in the same pass.
			rules = append(rules, r)
		}
	}
	return rules, errs
}

// nameNode returns the value node of a rule's name key.
func nameNode(rn *yaml.Node) *yaml.Node {
	for i := 0; i+1 < len(rn.Content); i += 2 {
		if rn.Content[i].Value == "name" {
			return rn.Content[i+1]
		}
	}
	return rn
}

// parseRule reads one rule mapping. It returns the rule (when it has at
// least a usable name) and every problem found in it.
func parseRule(src *source, hook string, rn *yaml.Node) (*ruleSpec, policy.Errors) {
	if rn.Kind != yaml.MappingNode {
		return nil, policy.Errors{src.nodeError(policy.CodeSchema, rn,
			"a rule must be a mapping with name, when and set")}
	}
	var errs policy.Errors
	r := &ruleSpec{hook: hook, node: rn}
	var haveSet bool
	for i := 0; i+1 < len(rn.Content); i += 2 {
		key, val := rn.Content[i], rn.Content[i+1]
		switch key.Value {
		case "name":
			if val.Kind != yaml.ScalarNode || val.Value == "" {
				errs = append(errs, src.nodeError(policy.CodeSchema, val, "name must be a non-empty string"))
				continue
			}
			r.name = val.Value
		case "description":
			if val.Kind != yaml.ScalarNode {
				errs = append(errs, src.nodeError(policy.CodeSchema, val, "description must be a string"))
				continue
			}
			r.description = val.Value
		case "when":
			if val.Kind != yaml.ScalarNode {
				errs = append(errs, src.nodeError(policy.CodeSchema, val,
					"when must be a CEL expression in a string"))
				continue
			}
			r.when = val
		case "set":
			haveSet = true
			if val.Kind != yaml.MappingNode || len(val.Content) == 0 {
				errs = append(errs, src.nodeError(policy.CodeSchema, val,
					"set must be a non-empty mapping of field to CEL expression"))
				continue
			}
			seen := map[string]bool{}
			for j := 0; j+1 < len(val.Content); j += 2 {
				fk, fv := val.Content[j], val.Content[j+1]
				if seen[fk.Value] {
					errs = append(errs, src.nodeError(policy.CodeSchema, fk, fmt.Sprintf("duplicate field %q", fk.Value)))
					continue
				}
				seen[fk.Value] = true
				if fv.Kind != yaml.ScalarNode {
					errs = append(errs, src.nodeError(policy.CodeSchema, fv, fmt.Sprintf(
						"field %s must be a CEL expression in a string (quote lists and maps, e.g. '[\"read\"]')", fk.Value)))
					continue
				}
				r.sets = append(r.sets, setSpec{field: fk.Value, key: fk, expr: fv})
			}
		case "shadow":
			if val.Kind != yaml.ScalarNode || val.Tag != "!!bool" {
				errs = append(errs, src.nodeError(policy.CodeSchema, val, "shadow must be true or false"))
				continue
			}
			// A !!bool scalar always decodes.
			_ = val.Decode(&r.shadow)
		default:
			errs = append(errs, src.nodeError(policy.CodeSchema, key,
				fmt.Sprintf("unknown rule key %q (want name, description, when, set or shadow)", key.Value)))
		}
	}
	if r.name == "" {
		if nameNode(rn) == rn {
			errs = append(errs, src.nodeError(policy.CodeSchema, rn, "rule is missing its name"))
		}
		return nil, errs
	}
	if !haveSet {
		errs = append(errs, src.nodeError(policy.CodeSchema, rn, fmt.Sprintf("rule %q has no set", r.name)))
	}
	for _, e := range errs {
		e.Rule = r.name
	}
	return r, errs
}
