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

var schemaAnnotations = map[string]bool{"$schema": true, "$id": true, "title": true, "description": true}

// jsonTypeOf is the type of a parsed value, or 0 for a Go value JSON cannot hold.
func jsonTypeOf(v any) typeSet {
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
	propAt   map[string]int // position in props of each property name
	mustHave uint64         // bit i: props[i] is required
	required []string       // required names that properties do not describe
	closed   bool           // additionalProperties: false
	extra    *schemaNode
}

type schemaProp struct {
	name string
	sub  *schemaNode
}

// maxProps bounds the properties of one schema object, so that the ones seen
// fit the bits of a word.
const maxProps = 64

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
		if _, ok := keywordTypes[k]; !ok && !schemaAnnotations[k] && k != "type" && k != "enum" {
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
	// Each group of type-specific keywords once, as compiled.py walks them.
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
		if !ok || high < 0 {
			uncompiled("maxLength that is not a non-negative integer")
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
	if props.Len() > maxProps {
		uncompiled("more than %d properties", maxProps)
	}
	n.propAt = make(map[string]int, props.Len())
	for i, name := range props.Keys() {
		n.props = append(n.props, schemaProp{name: name, sub: compileNode(props.Values()[i])})
		n.propAt[name] = i
		if required[name] {
			n.mustHave |= 1 << i
		}
	}
	for _, name := range ListOf(s.Get("required")) {
		str := name.(string)
		if !props.Has(str) && !hasString(n.required, str) {
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

func hasString(list []string, s string) bool {
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
	t := jsonTypeOf(v)
	if t == 0 || (n.types != 0 && n.types&t == 0) {
		return false
	}
	if n.enum != nil {
		s, ok := v.(string)
		if !ok || !hasString(n.enum, s) {
			return false
		}
	}
	switch x := v.(type) {
	case string:
		if n.strings {
			// Lengths count code points, of one to four bytes each: the byte
			// length alone often settles both bounds.
			sure := len(x) >= 4*n.minLen-3 && (n.maxLen < 0 || len(x) <= n.maxLen)
			if !sure {
				count := utf8.RuneCountInString(x)
				if count < n.minLen || (n.maxLen >= 0 && count > n.maxLen) {
					return false
				}
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
	var seen uint64
	next := 0 // values usually hold their properties in the schema's order
	for i, k := range o.Keys() {
		v := o.Values()[i]
		at, ok := next, next < len(n.props) && n.props[next].name == k
		if !ok {
			at, ok = n.propAt[k]
		}
		if ok {
			next = at + 1
			seen |= 1 << at
			if !n.props[at].sub.check(v) {
				return false
			}
		} else if n.closed || (n.extra != nil && !n.extra.check(v)) {
			return false
		}
	}
	if seen&n.mustHave != n.mustHave {
		return false
	}
	for _, name := range n.required {
		if !o.Has(name) {
			return false
		}
	}
	return true
}
