package foldcore

import (
	"fmt"
	"unicode/utf8"
)

// This file ports schemas/compiled.py's predicate: a test that answers true
// only for values a topic's JSON Schema surely accepts. Python sends whatever
// its predicate is unsure of to the full validator; the port gives up on it
// instead, so it never accepts a value Python rejects.

// typeSet is a set of JSON types as the predicate tells them apart (Python's
// type(v) is ...): bool is not an integer here.
type typeSet uint8

const (
	tObject typeSet = 1 << iota
	tArray
	tString
	tInteger
	tFloat // never held by a parsed value: Parse gives up on floats
	tBool
	tNull
)

var jsonTypes = map[string]typeSet{
	"object": tObject, "array": tArray, "string": tString, "integer": tInteger,
	"number": tInteger | tFloat, "boolean": tBool, "null": tNull,
}

// The keywords the predicate compiles, each with the types it applies to.
var keywordTypes = map[string]typeSet{
	"required": tObject, "properties": tObject, "additionalProperties": tObject,
	"items": tArray, "minLength": tString, "maxLength": tString, "pattern": tString,
	"minimum": tInteger | tFloat,
}

var annotations = map[string]bool{"$schema": true, "$id": true, "title": true, "description": true}

// typeOf is the type of a parsed value, or 0 for a Go value JSON cannot hold.
func typeOf(v any) typeSet {
	switch v.(type) {
	case *Obj:
		return tObject
	case []any:
		return tArray
	case string:
		return tString
	case int64:
		return tInteger
	case bool:
		return tBool
	case nil:
		return tNull
	}
	return 0
}

// schemaNode is one compiled (sub)schema.
type schemaNode struct {
	types typeSet // 0: no "type" keyword
	enum  []string

	strings  bool // minLength, maxLength or pattern apply
	minLen   int
	maxLen   int // -1: none
	pattern  func(string) bool
	numbers  bool // minimum applies
	minimum  int64
	items    *schemaNode // nil: no check on the elements
	objects  bool        // required, properties or additionalProperties apply
	props    []schemaProp
	required []string // required names that properties do not describe
	closed   bool     // additionalProperties: false
	extra    *schemaNode
}

type schemaProp struct {
	name     string
	required bool
	sub      *schemaNode
}

// errUncompiled marks a schema using something the predicate does not compile.
type errUncompiled struct{ what string }

func (e errUncompiled) Error() string { return "schema not compiled: " + e.what }

// compileSchema compiles a parsed JSON Schema, or fails exactly where
// compiled.py would give its topic no predicate.
func compileSchema(schema any) (node *schemaNode, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(errUncompiled)
			if !ok {
				panic(r)
			}
			node, err = nil, e
		}
	}()
	return compileNode(schema), nil
}

func uncompiled(format string, args ...any) {
	panic(errUncompiled{fmt.Sprintf(format, args...)})
}

func compileNode(schema any) *schemaNode {
	s := ObjOf(schema)
	if s == nil {
		uncompiled("a schema that is not an object")
	}
	for _, k := range s.Keys() {
		if _, ok := keywordTypes[k]; !ok && !annotations[k] && k != "type" && k != "enum" {
			uncompiled("keyword %q", k)
		}
	}
	n := &schemaNode{maxLen: -1}
	if s.Has("type") {
		n.types = allowedTypes(s)
	}
	if e, ok := s.Lookup("enum"); ok {
		values := ListOf(e)
		if len(values) == 0 {
			uncompiled("enum that is not a non-empty list")
		}
		for _, v := range values {
			str, ok := StrOf(v)
			if !ok {
				uncompiled("enum with a value that is not a string")
			}
			n.enum = append(n.enum, str)
		}
	}
	// Keyword groups in the order the schema first names them, as compiled.py
	// walks them: the order decides which unsupported thing is met first.
	var done typeSet
	for _, k := range s.Keys() {
		group, ok := keywordTypes[k]
		if !ok || done&group != 0 {
			continue
		}
		done |= group
		if n.types == 0 {
			uncompiled("keyword %q without a type", k)
		}
		if group&n.types == 0 {
			continue // the value's type can never have it: not compiled at all
		}
		switch group {
		case tString:
			n.compileString(s)
		case tInteger | tFloat:
			n.numbers = true
			m, ok := s.Get("minimum").(int64)
			if !ok {
				uncompiled("minimum that is not an integer")
			}
			n.minimum = m
		case tArray:
			n.items = compileNode(s.Get("items"))
			if n.items.trivial() {
				n.items = nil
			}
		case tObject:
			n.compileObject(s)
		}
	}
	return n
}

// allowedTypes reads a "type" keyword: one name or a non-empty list of names.
func allowedTypes(s *Obj) typeSet {
	raw := s.Get("type")
	names := ListOf(raw)
	if names == nil {
		names = []any{raw}
	}
	var set typeSet
	for _, name := range names {
		str, _ := StrOf(name)
		t, ok := jsonTypes[str]
		if !ok {
			uncompiled("type %v", name)
		}
		set |= t
	}
	if set == 0 {
		uncompiled("an empty type list")
	}
	return set
}

func (n *schemaNode) compileString(s *Obj) {
	n.strings = true
	if v, ok := s.Lookup("minLength"); ok {
		low, ok := v.(int64)
		if !ok {
			uncompiled("minLength that is not an integer")
		}
		n.minLen = int(low)
	}
	if v, ok := s.Lookup("maxLength"); ok {
		high, ok := v.(int64)
		if !ok {
			uncompiled("maxLength that is not an integer")
		}
		n.maxLen = int(high)
	}
	if v, ok := s.Lookup("pattern"); ok {
		str, _ := StrOf(v)
		match, ok := patternMatchers[str]
		if !ok {
			uncompiled("pattern %q has no Go matcher", str)
		}
		n.pattern = match
	}
}

func (n *schemaNode) compileObject(s *Obj) {
	n.objects = true
	required := map[string]bool{}
	if v, ok := s.Lookup("required"); ok {
		list, isList := v.([]any)
		if !isList {
			uncompiled("required that is not a list")
		}
		for _, name := range list {
			str, ok := StrOf(name)
			if !ok {
				uncompiled("required with a name that is not a string")
			}
			required[str] = true
		}
	}
	props := NewObj(0)
	if v, ok := s.Lookup("properties"); ok {
		if props = ObjOf(v); props == nil {
			uncompiled("properties that is not an object")
		}
	}
	for i, name := range props.Keys() {
		n.props = append(n.props, schemaProp{name: name, required: required[name], sub: compileNode(props.Values()[i])})
	}
	for _, name := range ListOf(s.Get("required")) {
		str := name.(string)
		if !props.Has(str) && !contains(n.required, str) {
			n.required = append(n.required, str)
		}
	}
	extra, ok := s.Lookup("additionalProperties")
	switch {
	case !ok || extra == true:
	case extra == false:
		n.closed = true
	default:
		if n.extra = compileNode(extra); n.extra.trivial() {
			n.extra = nil
		}
	}
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// trivial reports whether the node accepts every value.
func (n *schemaNode) trivial() bool {
	return n.types == 0 && n.enum == nil && !n.strings && !n.numbers && n.items == nil && !n.objects
}

// check is the predicate: true only when the schema surely accepts v.
func (n *schemaNode) check(v any) bool {
	t := typeOf(v)
	if t == 0 || (n.types != 0 && n.types&t == 0) {
		return false
	}
	if n.enum != nil {
		s, ok := v.(string)
		if !ok || !contains(n.enum, s) {
			return false
		}
	}
	switch x := v.(type) {
	case string:
		if n.strings {
			if count := utf8.RuneCountInString(x); count < n.minLen || (n.maxLen >= 0 && count > n.maxLen) {
				return false
			}
			if n.pattern != nil && !n.pattern(x) {
				return false
			}
		}
	case int64:
		if n.numbers && x < n.minimum {
			return false
		}
	case []any:
		if n.items != nil {
			for _, e := range x {
				if !n.items.check(e) {
					return false
				}
			}
		}
	case *Obj:
		if n.objects {
			return n.checkObject(x)
		}
	}
	return true
}

func (n *schemaNode) checkObject(o *Obj) bool {
	for i := range n.props {
		p := &n.props[i]
		v, ok := o.Lookup(p.name)
		if !ok {
			if p.required {
				return false
			}
			continue
		}
		if !p.sub.check(v) {
			return false
		}
	}
	for _, name := range n.required {
		if !o.Has(name) {
			return false
		}
	}
	if !n.closed && n.extra == nil {
		return true
	}
	for i, k := range o.Keys() {
		if n.known(k) {
			continue
		}
		if n.closed || !n.extra.check(o.Values()[i]) {
			return false
		}
	}
	return true
}

func (n *schemaNode) known(name string) bool {
	for i := range n.props {
		if n.props[i].name == name {
			return true
		}
	}
	return false
}

// patternMatchers holds a Go matcher for each pattern the schemas use, keyed
// by the pattern's text. The Python validator searches with the pattern's `$`
// read as end of string (\Z), so no trailing newline is allowed; these
// matchers are exact for that reading. A pattern missing here is not compiled.
var patternMatchers = map[string]func(string) bool{
	`^[A-Za-z0-9][A-Za-z0-9_-]*$`:                                       isToken,
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`: isDNSSubdomain,
	`^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$`:                                func(s string) bool { return s == "" || isDNSLabel(s) },
	`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`:                                   isDNSLabel,
}

func isAlnumLower(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') }

// isToken: an ASCII letter or digit, then letters, digits, '_' or '-'.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || (i > 0 && (c == '_' || c == '-'))
		if !ok {
			return false
		}
	}
	return true
}

// isDNSLabel: lower-case letters, digits and '-', starting and ending with a
// letter or digit.
func isDNSLabel(s string) bool {
	if s == "" || !isAlnumLower(s[0]) || !isAlnumLower(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c != '-' && !isAlnumLower(c) {
			return false
		}
	}
	return true
}

// isDNSSubdomain: DNS labels joined by single dots.
func isDNSSubdomain(s string) bool {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if !isDNSLabel(s[start:i]) {
				return false
			}
			start = i + 1
		}
	}
	return true
}
