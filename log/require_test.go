package log_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// require is a minimal stand-in for testify's require (testify's go.sum
// entries are incomplete in this module for now): every check stops the
// test at the first failure.
var require requireT

type requireT struct{}

type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func msg(extra []any) string {
	if len(extra) == 0 {
		return ""
	}
	if f, ok := extra[0].(string); ok {
		return ": " + fmt.Sprintf(f, extra[1:]...)
	}
	return ": " + fmt.Sprint(extra...)
}

func (requireT) NoError(t tb, err error, extra ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v%s", err, msg(extra))
	}
}

func (requireT) Error(t tb, err error, extra ...any) {
	t.Helper()
	if err == nil {
		t.Fatalf("expected an error%s", msg(extra))
	}
}

func (requireT) ErrorIs(t tb, err, target error, extra ...any) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v is not %v%s", err, target, msg(extra))
	}
}

func (requireT) Equal(t tb, want, got any, extra ...any) {
	t.Helper()
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("not equal:\nwant %#v\ngot  %#v%s", want, got, msg(extra))
	}
}

func (requireT) True(t tb, v bool, extra ...any) {
	t.Helper()
	if !v {
		t.Fatalf("expected true%s", msg(extra))
	}
}

func (requireT) False(t tb, v bool, extra ...any) {
	t.Helper()
	if v {
		t.Fatalf("expected false%s", msg(extra))
	}
}

func (requireT) Contains(t tb, s, sub string, extra ...any) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%q does not contain %q%s", s, sub, msg(extra))
	}
}

func (requireT) Greater(t tb, a, b int, extra ...any) {
	t.Helper()
	if a <= b {
		t.Fatalf("%d is not greater than %d%s", a, b, msg(extra))
	}
}

func (requireT) LessOrEqual(t tb, a, b int64, extra ...any) {
	t.Helper()
	if a > b {
		t.Fatalf("%d is greater than %d%s", a, b, msg(extra))
	}
}

func (requireT) NotNil(t tb, v any, extra ...any) {
	t.Helper()
	if v == nil || (reflect.ValueOf(v).Kind() == reflect.Func && reflect.ValueOf(v).IsNil()) {
		t.Fatalf("expected non-nil%s", msg(extra))
	}
}

var _ testing.TB = (*testing.T)(nil)
