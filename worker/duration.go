package worker

import (
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"
)

// duration is a duration in a policies file: a Go duration with its unit
// ("500ms", "30s", "10m"), or 0 for the field's default. Decoding never
// fails on the value itself, so the entry can name the field: what does
// not parse is kept, and reported by get.
type duration struct {
	d   time.Duration
	bad string // the value as written, when it is not a duration
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	*d = duration{}
	switch {
	case n.Kind != yaml.ScalarNode:
		d.bad = "(a " + kindName(n.Kind) + ")"
	case n.Value == "0":
	default:
		v, err := time.ParseDuration(n.Value)
		if err != nil {
			d.bad = n.Value
			return nil
		}
		d.d = v
	}
	return nil
}

// get returns the duration, or a *PolicyError naming field when the file's
// value is not one.
func (d duration) get(field string) (time.Duration, error) {
	if d.bad == "" {
		return d.d, nil
	}
	if _, err := strconv.ParseFloat(d.bad, 64); err == nil {
		return 0, &PolicyError{Field: field, Value: d.bad, Problem: "has no unit",
			Fix: "write the unit, e.g. " + d.bad + "s or " + d.bad + "ms (0 alone for the default)"}
	}
	return 0, &PolicyError{Field: field, Value: d.bad, Problem: "is not a duration",
		Fix: `write a Go duration with its unit, e.g. "500ms", "30s" or "10m" (0 for the default)`}
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	case yaml.AliasNode:
		return "alias"
	}
	return "document"
}
