package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/osaurus/osaurus-sandbox/agentproto"
)

// Plugin is one recipe, the seed's schema. The id is not stored: it is
// derived from the name (ID), as in Osaurus, so a recipe shared between
// the two apps keeps its identity.
type Plugin struct {
	Name         string            `json:"name"`
	Description  string            `json:"description"`
	Version      string            `json:"version,omitempty"`
	Author       string            `json:"author,omitempty"`
	Source       string            `json:"source,omitempty"`
	Dependencies []string          `json:"dependencies,omitempty"`
	Setup        string            `json:"setup,omitempty"`
	Files        map[string]string `json:"files,omitempty"`
	Tools        []Tool            `json:"tools,omitempty"`
	Secrets      []string          `json:"secrets,omitempty"`
	Permissions  *Permissions      `json:"permissions,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
}

// Tool is one AI-callable tool; its MCP name is {pluginId}_{toolId}.
type Tool struct {
	ID          string               `json:"id"`
	Description string               `json:"description"`
	Parameters  map[string]Parameter `json:"parameters,omitempty"`
	Run         string               `json:"run"`
}

// Parameter is one tool argument. Without a default it is required.
type Parameter struct {
	Type        string            `json:"type"`
	Description string            `json:"description,omitempty"`
	Default     json.RawMessage   `json:"default,omitempty"`
	Enum        []json.RawMessage `json:"enum,omitempty"`
}

// Permissions is what the plugin asks of the sandbox.
type Permissions struct {
	// Network is "outbound", "none", or a comma-separated list of host names.
	Network   string `json:"network,omitempty"`
	Inference bool   `json:"inference,omitempty"`
}

// MaxRecipeBytes caps a recipe's JSON text. Files are inline, so this is
// also the cap on everything a plugin seeds.
const MaxRecipeBytes = 4 << 20

// ErrInvalid is wrapped by every decoding and validation failure.
var ErrInvalid = agentproto.Class(agentproto.ErrInvalid, "invalid plugin")

// Problem is one thing wrong with a recipe: the field (a JSON path such as
// tools[1].parameters.file.type), what is wrong, and how to fix it.
type Problem struct {
	Field   string `json:"field"`
	Message string `json:"message"`
	Fix     string `json:"fix"`
}

func (p Problem) String() string {
	return fmt.Sprintf("%s: %s; %s", p.Field, p.Message, p.Fix)
}

// InvalidError lists every problem found, so an editor can show them all
// at once instead of one per save.
type InvalidError struct {
	Problems []Problem
}

func (e *InvalidError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return "invalid plugin: " + strings.Join(parts, "\n  ")
}

func (e *InvalidError) Unwrap() error { return ErrInvalid }

func invalid(field, message, fix string) *InvalidError {
	return &InvalidError{Problems: []Problem{{field, message, fix}}}
}

// Decode reads one recipe strictly: unknown or duplicated keys, a wrong
// type, trailing data or more than MaxRecipeBytes are refused, each error
// naming the field. It does not validate; call Validate.
func Decode(r io.Reader) (*Plugin, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxRecipeBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading plugin: %w", err)
	}
	return DecodeBytes(data)
}

// DecodeBytes is Decode on a byte slice.
func DecodeBytes(data []byte) (*Plugin, error) {
	if len(data) > MaxRecipeBytes {
		return nil, invalid("(file)", fmt.Sprintf("larger than %d MiB", MaxRecipeBytes>>20),
			"move large content out of files and create it in setup instead")
	}
	// encoding/json takes the last of duplicated keys and names unknown
	// keys without their path; walking the tokens first gives both a
	// precise error and a guarantee that what a reviewer reads is what runs.
	if err := checkShape(data); err != nil {
		return nil, err
	}
	var p Plugin
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				field = "(top level)"
			}
			return nil, invalid(field, fmt.Sprintf("got a JSON %s, want %s", te.Value, jsonKind(te.Type.String())),
				"change the value to the expected type")
		}
		return nil, invalid("(file)", "not valid JSON: "+err.Error(), "fix the JSON syntax")
	}
	return &p, nil
}

func jsonKind(goType string) string {
	switch {
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "."):
		return "an object"
	}
	return goType
}

// shape describes which keys each object may hold: a nil map means any
// key (files, parameters, metadata), with values of the elem shape.
type shape struct {
	keys map[string]*shape // known keys → their value's shape (nil: scalar)
	elem *shape            // for arrays and free-keyed objects
	free bool              // object with free keys
}

var (
	paramShape = &shape{keys: map[string]*shape{"type": nil, "description": nil, "default": anyShape, "enum": anyShape}}
	anyShape   = &shape{} // anything goes below (default and enum values)
	toolShape  = &shape{keys: map[string]*shape{
		"id": nil, "description": nil, "run": nil,
		"parameters": {free: true, elem: paramShape},
	}}
	pluginShape = &shape{keys: map[string]*shape{
		"name": nil, "description": nil, "version": nil, "author": nil, "source": nil,
		"dependencies": nil, "setup": nil, "secrets": nil,
		"files":       {free: true},
		"metadata":    {free: true},
		"tools":       {elem: toolShape},
		"permissions": {keys: map[string]*shape{"network": nil, "inference": nil}},
	}}
)

// checkShape walks the JSON tokens once, refusing duplicate keys anywhere
// and keys the schema doesn't know, with their full path.
func checkShape(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return invalid("(file)", "not valid JSON: "+err.Error(), "the file must hold one JSON object")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return invalid("(file)", "not a JSON object", "the recipe must be one {...} object with at least name and description")
	}
	if err := walkObject(dec, "", pluginShape); err != nil {
		return err
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid("(file)", "data after the plugin object", "keep exactly one JSON object in the file")
	}
	return nil
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func walkObject(dec *json.Decoder, path string, s *shape) error {
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return invalid(orTop(path), "not valid JSON: "+err.Error(), "fix the JSON syntax")
		}
		key := tok.(string) // object keys are always strings
		field := join(path, key)
		if seen[key] {
			return invalid(field, "appears twice", "keep one of the two entries")
		}
		seen[key] = true
		var child *shape
		switch {
		case s == anyShape:
			child = anyShape
		case s.free:
			child = s.elem
		default:
			c, ok := s.keys[key]
			if !ok {
				return invalid(field, "unknown field", "remove it or correct the spelling; known fields here: "+knownKeys(s))
			}
			child = c
		}
		if err := walkValue(dec, field, child); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing }
		return invalid(orTop(path), "not valid JSON: "+err.Error(), "fix the JSON syntax")
	}
	return nil
}

func walkValue(dec *json.Decoder, path string, s *shape) error {
	tok, err := dec.Token()
	if err != nil {
		return invalid(path, "not valid JSON: "+err.Error(), "fix the JSON syntax")
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return nil // scalars are type-checked by the decoder
	}
	switch d {
	case '{':
		if s == nil {
			s = anyShape // wrong type; the decoder names it
		}
		return walkObject(dec, path, s)
	case '[':
		elem := anyShape
		if s != nil && s != anyShape && s.elem != nil {
			elem = s.elem
		}
		for i := 0; dec.More(); i++ {
			if err := walkValue(dec, fmt.Sprintf("%s[%d]", path, i), elem); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return invalid(path, "not valid JSON: "+err.Error(), "fix the JSON syntax")
		}
	}
	return nil
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}

func knownKeys(s *shape) string {
	var ks []string
	for k := range s.keys {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ", ")
}

// Encode writes the recipe as indented JSON, keys in schema order and map
// keys sorted, so exports diff cleanly.
func (p *Plugin) Encode() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Clone returns a deep copy.
func (p *Plugin) Clone() *Plugin {
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // a Plugin is always marshalable
	}
	var q Plugin
	if err := json.Unmarshal(b, &q); err != nil {
		panic(err)
	}
	return &q
}
