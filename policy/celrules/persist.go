package celrules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"time"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	"github.com/turngate/turngate/engine"
	"github.com/turngate/turngate/policy"
)

// beforePersist rules mask what the store keeps of a message, never what
// the model of the running turn saw:
//
//	beforePersist:
//	  - name: mask-card-numbers
//	    when: message.role == "user" || message.role == "assistant"
//	    set:
//	      redact: '["\\b(?:\\d[ -]?){12,18}\\d\\b"]'   # RE2 patterns
//	      mask: '"[card]"'                              # default "[redacted]"
//
// Each fired rule replaces every match of its patterns, in rule order, in
// the message's text and reasoning parts, tool error texts, and the string
// values of tool inputs, outputs and data parts. mask may name a pattern's
// groups as \1 … \9 (regex.replace's convention): '"****\\1"' keeps them.

// DefaultMask replaces what a beforePersist rule that sets no mask matches.
const DefaultMask = "[redacted]"

// persistFields are the fields beforePersist rules set, by name.
var persistFields = map[string]*fieldSpec{
	"redact": {name: "redact", want: []*types.Type{stringListType}, decode: decodePatterns, copies: true},
	"mask":   {name: "mask", want: []*types.Type{types.StringType}, decode: decodeMask, copies: true},
}

// persistFieldOrder lists persistFields' names for messages.
var persistFieldOrder = []string{"redact", "mask"}

// patterns is a decoded redact value: the RE2 sources and their programs.
type patterns struct {
	src []string
	res []*regexp.Regexp
}

// decodePatterns decodes redact: a list of RE2 patterns, none of which
// matches the empty string (it would insert the mask between every two
// characters).
func decodePatterns(v ref.Val) (any, error) {
	list, err := decodeStringList(v)
	if err != nil {
		return nil, err
	}
	p := patterns{src: list.([]string)}
	for i, s := range p.src {
		re, err := regexp.Compile(s)
		if err != nil {
			return nil, fmt.Errorf("pattern %d: %v", i, err)
		}
		if re.MatchString("") {
			return nil, fmt.Errorf("pattern %d (%q) matches the empty string", i, s)
		}
		p.res = append(p.res, re)
	}
	return p, nil
}

// groupRef is a \N group reference in a mask.
var groupRef = regexp.MustCompile(`\\([0-9])`)

// decodeMask decodes mask into a regexp.Expand template: \N becomes ${N}
// and a literal $ is escaped.
func decodeMask(v ref.Val) (any, error) {
	s, err := decodeString(v)
	if err != nil {
		return nil, err
	}
	return mask{text: s.(string), template: groupRef.ReplaceAllString(strings.ReplaceAll(s.(string), "$", "$$"), "$${$1}")}, nil
}

// mask is a decoded mask.
type mask struct{ text, template string }

// checkPersistRule reports a beforePersist rule that redacts nothing.
func (c *compiler) checkPersistRule(src *source, spec *ruleSpec, r *rule) {
	for _, s := range r.sets {
		if s.field.name == "redact" {
			return
		}
	}
	for _, s := range spec.sets {
		if s.field == "redact" {
			return // its error is reported already
		}
	}
	c.add(src.nodeError(policy.CodeSchema, nameNode(spec.node),
		"a beforePersist rule must set redact (the patterns it masks)"), spec.name, "redact")
}

// Persisted is what the beforePersist rules did to one message: the
// message as stored and, as its decision record shows, each fired rule's
// redaction and how many matches were masked.
type Persisted struct {
	// Message is the message to store.
	Message engine.UIMessage `json:"-"`
	// Redactions are the fired rules' redactions, in rule order.
	Redactions []Redaction `json:"redactions"`
	// Masked counts the matches replaced.
	Masked int `json:"masked"`
}

// Redaction is one fired rule's patterns and mask.
type Redaction struct {
	Rule     string   `json:"rule"`
	Patterns []string `json:"redact"`
	Mask     string   `json:"mask"`
	res      []*regexp.Regexp
	template string
}

// HasBeforePersist reports whether the set has beforePersist rules.
func (s *Set) HasBeforePersist() bool { return len(s.persistRules) > 0 }

// BeforePersist evaluates the beforePersist rules on m, a message about to
// be stored for the turn id, and returns it as it must be stored; nil when
// no rule fired. m is not changed. An error (a rule's evaluation, a
// pattern computed at run time that does not compile) is a
// *policy.Error: the caller must not store m. Shadow rules never change
// the result; what they would have masked is in Trace.Shadow.
func (s *Set) BeforePersist(ctx context.Context, id *engine.Identity, m *engine.UIMessage, now time.Time) (*Persisted, Trace, error) {
	act := persistActivation(id, m, now)
	enforced, err := s.eval(ctx, s.persistRules, act, false)
	if err != nil {
		return nil, Trace{}, err
	}
	out := redact(m, enforced)
	tr := Trace{RulesFired: enforced.fired, RulesFiredAt: s.definedAt.At(enforced.fired)}
	if out != nil {
		tr.SetBy = map[string]string{"redact": enforced.fired[len(enforced.fired)-1]}
	}
	if !s.persistShadow {
		return out, tr, nil
	}
	tr.Shadow = &policy.Shadow{}
	shadow, err := s.eval(ctx, s.persistRules, act, true)
	if err != nil {
		tr.Shadow.Error = err.Error()
		return out, tr, nil
	}
	tr.Shadow.RulesFired = shadow.fired
	all := firing{fired: append(enforced.fired[:len(enforced.fired):len(enforced.fired)], shadow.fired...),
		contribs: interleave(enforced.contribs, shadow.contribs)}
	if would := redact(m, all); would != nil {
		tr.Shadow.Decision = would
		tr.Shadow.Changed = out == nil || !reflect.DeepEqual(out.Message, would.Message)
	}
	return out, tr, nil
}

// persistActivation binds beforePersist's variables; message is m in the
// model's view (engine.ConvertToModelMessages, its messages' content
// joined).
func persistActivation(id *engine.Identity, m *engine.UIMessage, now time.Time) *activation {
	mm := &engine.ModelMessage{Role: m.Role}
	for _, c := range engine.ConvertToModelMessages([]engine.UIMessage{*m}) {
		mm.Content = append(mm.Content, c.Content...)
	}
	a := identityActivation(id, now)
	a.message = object{messageType, mm}
	return a
}

// redact applies the fired rules' redactions to a copy of m; nil when no
// rule fired.
func redact(m *engine.UIMessage, f firing) *Persisted {
	if f.fired == nil {
		return nil
	}
	out := &Persisted{}
	byRule := map[*rule]int{}
	for _, c := range f.contribs {
		i, ok := byRule[c.rule]
		if !ok {
			i = len(out.Redactions)
			byRule[c.rule] = i
			out.Redactions = append(out.Redactions, Redaction{Rule: c.rule.id, Mask: DefaultMask, template: DefaultMask})
		}
		r := &out.Redactions[i]
		switch v := c.value.(type) {
		case patterns:
			r.Patterns, r.res = v.src, v.res
		case mask:
			r.Mask, r.template = v.text, v.template
		}
	}
	out.Message = *m
	out.Message.Parts = make([]engine.UIPart, len(m.Parts))
	for i, p := range m.Parts {
		for _, r := range out.Redactions {
			out.Masked += r.part(&p)
		}
		out.Message.Parts[i] = p
	}
	return out
}

// part masks p's text fields in place and returns the matches it replaced.
func (r *Redaction) part(p *engine.UIPart) int {
	n := r.text(&p.Text) + r.text(&p.ErrorText)
	for _, raw := range []*json.RawMessage{&p.Input, &p.Output, &p.Data} {
		n += r.json(raw)
	}
	return n
}

// text masks *s in place.
func (r *Redaction) text(s *string) int {
	n := 0
	for _, re := range r.res {
		if k := len(re.FindAllStringIndex(*s, -1)); k > 0 {
			n += k
			*s = re.ReplaceAllString(*s, r.template)
		}
	}
	return n
}

// json masks the string values of a JSON document in place; a document
// that does not decode is left as it is (the store keeps only valid JSON
// the engine produced).
func (r *Redaction) json(raw *json.RawMessage) int {
	if len(*raw) == 0 || !bytes.ContainsRune(*raw, '"') {
		return 0
	}
	dec := json.NewDecoder(bytes.NewReader(*raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return 0
	}
	n := 0
	v = r.walk(v, &n)
	if n == 0 {
		return 0
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return 0
	}
	*raw = bytes.TrimRight(buf.Bytes(), "\n")
	return n
}

func (r *Redaction) walk(v any, n *int) any {
	switch t := v.(type) {
	case string:
		*n += r.text(&t)
		return t
	case []any:
		for i := range t {
			t[i] = r.walk(t[i], n)
		}
	case map[string]any:
		for k := range t {
			t[k] = r.walk(t[k], n)
		}
	}
	return v
}

// PersistInput is what the beforePersist rules see when they evaluate m
// for the turn id at now, as an Input.
func PersistInput(id *engine.Identity, m *engine.UIMessage, now time.Time) *Input {
	p := id.Principal
	return &Input{Message: m, Agent: id.Agent, SessionID: id.SessionID, RequestID: id.RequestID,
		Deadline: id.Deadline, Aborted: id.Aborted, Principal: &p, Now: &now}
}

// errNoMessage is the dry-run error of a beforePersist input without one.
var errNoMessage = errors.New("evaluating rules: a beforePersist input needs message")
