package scripted

import "encoding/json"

// maxSampleDepth bounds how deep sample follows nested schemas, so a
// hostile or recursive-looking schema cannot make a reply unbounded.
const maxSampleDepth = 16

// sample returns a deterministic value that satisfies the common parts of
// a JSON Schema: const, default, the first enum value, and for objects
// every required property. Other schemas give the zero value of their type.
func sample(schema json.RawMessage) any {
	var s map[string]any
	if json.Unmarshal(schema, &s) != nil {
		return map[string]any{}
	}
	return sampleValue(s, 0)
}

func sampleValue(s map[string]any, depth int) any {
	if v, ok := s["const"]; ok {
		return v
	}
	if v, ok := s["default"]; ok {
		return v
	}
	if enum, ok := s["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := s["type"].(string)
	if types, ok := s["type"].([]any); ok && len(types) > 0 {
		typ, _ = types[0].(string)
	}
	if typ == "" {
		if _, ok := s["properties"]; ok {
			typ = "object"
		}
	}
	switch typ {
	case "string":
		return ""
	case "number", "integer":
		if m, ok := s["minimum"].(float64); ok {
			return m
		}
		return 0
	case "boolean":
		return false
	case "null":
		return nil
	case "array":
		return []any{}
	case "object":
		out := map[string]any{}
		if depth >= maxSampleDepth {
			return out
		}
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		for _, r := range required {
			name, ok := r.(string)
			if !ok {
				continue
			}
			sub, _ := props[name].(map[string]any)
			out[name] = sampleValue(sub, depth+1)
		}
		return out
	}
	return nil
}
