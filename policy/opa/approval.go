package opa

import (
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/turngate/turngate/engine"
)

// ApproverRolePrefix prefixes every approver of an approval reason: an
// approver is "role:NAME", a principal holding role NAME.
const ApproverRolePrefix = "role:"

// ApproverRequester, among an approval reason's approvers, lets the
// principal whose turn asked for the approval decide it too. Without it
// the gateway refuses the requester's decision even when it holds one of
// the roles: nobody approves their own call unless a rule says so.
const ApproverRequester = "requester"

// approvalReasons reads the approval rule: a set whose members are strings
// (the chat user may approve) or objects {"reason": string, "approvers":
// ["role:NAME", …]} (only principals holding one of the roles may). It
// returns the reasons sorted by their canonical JSON, and that JSON for the
// fired-rule references.
func approvalReasons(obj ast.Object) ([]engine.ApprovalReason, []string, error) {
	ts, err := members(obj, ToolCallPackage, ruleApproval)
	if err != nil || len(ts) == 0 {
		return nil, nil, err
	}
	type entry struct {
		r    engine.ApprovalReason
		text string
	}
	entries := make([]entry, 0, len(ts))
	for _, t := range ts {
		r, err := approvalReason(t)
		if err != nil {
			return nil, nil, err
		}
		text, _ := marshalValue(t.Value)
		entries = append(entries, entry{r, string(text)})
	}
	slices.SortFunc(entries, func(x, y entry) int { return strings.Compare(x.text, y.text) })
	entries = slices.CompactFunc(entries, func(x, y entry) bool { return x.text == y.text })
	reasons, refs := make([]engine.ApprovalReason, len(entries)), make([]string, len(entries))
	for i, e := range entries {
		reasons[i], refs[i] = e.r, e.text
	}
	return reasons, refs, nil
}

// approvalReason validates one member of the approval rule.
func approvalReason(t *ast.Term) (engine.ApprovalReason, error) {
	switch v := t.Value.(type) {
	case ast.String:
		if v == "" {
			return engine.ApprovalReason{}, validationError(ToolCallPackage, ruleApproval, "member %v is an empty reason", t)
		}
		return engine.ApprovalReason{Reason: string(v)}, nil
	case ast.Object:
		var r engine.ApprovalReason
		for _, k := range v.Keys() {
			val := v.Get(k).Value
			switch k.Value {
			case ast.String("reason"):
				s, ok := val.(ast.String)
				if !ok || s == "" {
					return r, validationError(ToolCallPackage, ruleApproval, "member %v: reason is %s, want a non-empty string", t, ast.ValueName(val))
				}
				r.Reason = string(s)
			case ast.String("approvers"):
				roles, err := approverRoles(t, val)
				if err != nil {
					return r, err
				}
				r.Approvers = roles
			default:
				return r, validationError(ToolCallPackage, ruleApproval, "member %v has unknown key %v (want reason and approvers)", t, k)
			}
		}
		switch {
		case r.Reason == "":
			return r, validationError(ToolCallPackage, ruleApproval, "member %v has no reason", t)
		case r.Approvers == nil:
			return r, validationError(ToolCallPackage, ruleApproval, "member %v has no approvers (write the reason as a string to let the chat user approve)", t)
		}
		return r, nil
	}
	return engine.ApprovalReason{}, validationError(ToolCallPackage, ruleApproval, "member %v is %s, want a string or an object {\"reason\": …, \"approvers\": [\"role:NAME\", …]}", t, ast.ValueName(t.Value))
}

// approverRoles validates an approvers list: a non-empty array (or set)
// of "role:NAME" strings, returned sorted.
func approverRoles(member *ast.Term, v ast.Value) ([]string, error) {
	var elems []*ast.Term
	switch a := v.(type) {
	case *ast.Array:
		for i := range a.Len() {
			elems = append(elems, a.Elem(i))
		}
	case ast.Set:
		elems = a.Slice()
	default:
		return nil, validationError(ToolCallPackage, ruleApproval, "member %v: approvers is %s, want an array of \"role:NAME\" strings", member, ast.ValueName(v))
	}
	if len(elems) == 0 {
		return nil, validationError(ToolCallPackage, ruleApproval, "member %v: approvers is empty (nobody could approve)", member)
	}
	roles := make([]string, 0, len(elems))
	for _, e := range elems {
		s, ok := e.Value.(ast.String)
		if !ok || (string(s) != ApproverRequester && (!strings.HasPrefix(string(s), ApproverRolePrefix) || len(s) == len(ApproverRolePrefix))) {
			return nil, validationError(ToolCallPackage, ruleApproval, "member %v: approver %v is not \"role:NAME\" or \"%s\"", member, e, ApproverRequester)
		}
		roles = append(roles, string(s))
	}
	slices.Sort(roles)
	return slices.Compact(roles), nil
}

// approvalType checks the type of an approval rule's members: strings or
// objects with reason and approvers.
func approvalType(t types.Type) bool {
	if types.Compare(t, types.S) == 0 {
		return true
	}
	obj, ok := t.(*types.Object)
	if !ok {
		return false
	}
	if obj.DynamicProperties() != nil {
		return true
	}
	for _, p := range obj.StaticProperties() {
		if p.Key != "reason" && p.Key != "approvers" {
			return false
		}
	}
	return true
}
