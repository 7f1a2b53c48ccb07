package storage

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// setter copies row i of one column into one field of a row struct.
type setter func(dst reflect.Value, i int)

// DecodeBatch is the typed read of an Arrow batch of a committed file
// (File.Batches): it returns the rows of rec for which keep (nil: every
// row) is true, as values of T, each field of T filled from the column
// named by its parquet tag. T is a row type of schemas or a projection of
// one (a struct with some of its fields), so a reader decodes only the
// columns it uses. Lists are copied. A column missing or of another type
// is an ErrCorrupt error naming it; no row is decoded then.
func DecodeBatch[T any](rec arrow.RecordBatch, keep func(i int) bool) ([]T, error) {
	rt := reflect.TypeFor[T]()
	plan := make([]setter, rt.NumField())
	for k := 0; k < rt.NumField(); k++ {
		f := rt.Field(k)
		name, _, _ := strings.Cut(f.Tag.Get("parquet"), ",")
		idx := rec.Schema().FieldIndices(name)
		if len(idx) != 1 {
			return nil, fmt.Errorf("%w: no column %s", ErrCorrupt, name)
		}
		s, err := fieldSetter(k, f.Type, rec.Column(idx[0]))
		if err != nil {
			return nil, fmt.Errorf("%w: column %s: %v", ErrCorrupt, name, err)
		}
		plan[k] = s
	}
	out := make([]T, 0, rec.NumRows())
	for i := 0; i < int(rec.NumRows()); i++ {
		if keep != nil && !keep(i) {
			continue
		}
		var row T
		v := reflect.ValueOf(&row).Elem()
		for _, s := range plan {
			s(v, i)
		}
		out = append(out, row)
	}
	return out, nil
}

func fieldSetter(k int, t reflect.Type, col arrow.Array) (setter, error) {
	bad := func() (setter, error) { return nil, fmt.Errorf("type %s does not fill a Go %s", col.DataType(), t) }
	switch t.Kind() {
	case reflect.String:
		c, ok := col.(*array.String)
		if !ok {
			return bad()
		}
		return func(dst reflect.Value, i int) { dst.Field(k).SetString(c.Value(i)) }, nil
	case reflect.Bool:
		c, ok := col.(*array.Boolean)
		if !ok {
			return bad()
		}
		return func(dst reflect.Value, i int) { dst.Field(k).SetBool(c.Value(i)) }, nil
	case reflect.Int32, reflect.Int64:
		switch c := col.(type) {
		case *array.Int32:
			return func(dst reflect.Value, i int) { dst.Field(k).SetInt(int64(c.Value(i))) }, nil
		case *array.Int64:
			return func(dst reflect.Value, i int) { dst.Field(k).SetInt(c.Value(i)) }, nil
		}
		return bad()
	case reflect.Float32, reflect.Float64:
		switch c := col.(type) {
		case *array.Float32:
			return func(dst reflect.Value, i int) { dst.Field(k).SetFloat(float64(c.Value(i))) }, nil
		case *array.Float64:
			return func(dst reflect.Value, i int) { dst.Field(k).SetFloat(c.Value(i)) }, nil
		}
		return bad()
	case reflect.Slice:
		l, ok := col.(*array.List)
		if !ok {
			return bad()
		}
		switch v := l.ListValues().(type) {
		case *array.String:
			if t.Elem().Kind() != reflect.String {
				return bad()
			}
			return func(dst reflect.Value, i int) {
				lo, hi := l.ValueOffsets(i)
				s := make([]string, 0, hi-lo)
				for j := lo; j < hi; j++ {
					s = append(s, v.Value(int(j)))
				}
				dst.Field(k).Set(reflect.ValueOf(s).Convert(t))
			}, nil
		case *array.Int8:
			return listSetter(k, t, l, v.Values())
		case *array.Int16:
			return listSetter(k, t, l, v.Values())
		case *array.Int32:
			return listSetter(k, t, l, v.Values())
		case *array.Int64:
			return listSetter(k, t, l, v.Values())
		case *array.Float32:
			return listSetter(k, t, l, v.Values())
		}
		return bad()
	}
	return bad()
}

// listSetter copies a numeric list column into a field of type []E.
func listSetter[E any](k int, t reflect.Type, l *array.List, vals []E) (setter, error) {
	if reflect.TypeFor[[]E]() != t {
		return nil, fmt.Errorf("type %s does not fill a Go %s", l.DataType(), t)
	}
	return func(dst reflect.Value, i int) {
		lo, hi := l.ValueOffsets(i)
		if lo < 0 || hi < lo || int(hi) > len(vals) {
			return // an inconsistent list reads as empty
		}
		dst.Field(k).Set(reflect.ValueOf(append(make([]E, 0, hi-lo), vals[lo:hi]...)))
	}, nil
}

// ListColumn is a list column of a batch whose elements are a numeric
// array, read without copies: for readers that need a list's length or a
// pass over it, not a copy (DecodeBatch copies).
type ListColumn[E any] struct {
	l    *array.List
	vals []E
}

// ListOf returns the list column name of rec, whose elements must be an
// array of type A (*array.Int32, *array.Float32, ...); a column missing or
// of another type is an ErrCorrupt error naming it.
func ListOf[E any, A interface {
	arrow.Array
	Values() []E
}](rec arrow.RecordBatch, name string) (ListColumn[E], error) {
	idx := rec.Schema().FieldIndices(name)
	if len(idx) != 1 {
		return ListColumn[E]{}, fmt.Errorf("%w: no column %s", ErrCorrupt, name)
	}
	l, ok := rec.Column(idx[0]).(*array.List)
	if !ok {
		return ListColumn[E]{}, fmt.Errorf("%w: column %s has type %s", ErrCorrupt, name, rec.Column(idx[0]).DataType())
	}
	v, ok := l.ListValues().(A)
	if !ok {
		return ListColumn[E]{}, fmt.Errorf("%w: column %s has elements of type %s", ErrCorrupt, name, l.ListValues().DataType())
	}
	return ListColumn[E]{l: l, vals: v.Values()}, nil
}

// At returns row i's list; it aliases the batch's memory. An inconsistent
// list reads as empty.
func (c ListColumn[E]) At(i int) []E {
	lo, hi := c.l.ValueOffsets(i)
	if lo < 0 || hi < lo || int(hi) > len(c.vals) {
		return nil
	}
	return c.vals[lo:hi]
}
