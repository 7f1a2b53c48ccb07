package handoff

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
)

// pickler writes Python pickle protocol 2 for the values a torch.save of
// plain Python data holds: dicts with string keys, lists, ints, floats,
// strings, bools and None. It writes no memo (nothing is shared), which
// every unpickler accepts.
type pickler struct{ b []byte }

// Pickle opcodes (Python's Lib/pickle.py).
const (
	opProto      = 0x80
	opStop       = '.'
	opNone       = 'N'
	opTrue       = 0x88
	opFalse      = 0x89
	opBinInt     = 'J'
	opLong1      = 0x8a
	opBinFloat   = 'G'
	opBinUnicode = 'X'
	opEmptyList  = ']'
	opEmptyDict  = '}'
	opMark       = '('
	opAppends    = 'e'
	opSetItems   = 'u'
)

// batch is how many items one APPENDS or SETITEMS adds, as Python's own
// pickler batches them.
const batch = 1000

// pickle returns v as a pickle: PROTO 2, v, STOP.
func pickle(v any) ([]byte, error) {
	p := &pickler{b: []byte{opProto, 2}}
	if err := p.value(v); err != nil {
		return nil, err
	}
	return append(p.b, opStop), nil
}

func (p *pickler) value(v any) error {
	switch x := v.(type) {
	case nil:
		p.b = append(p.b, opNone)
	case bool:
		if x {
			p.b = append(p.b, opTrue)
		} else {
			p.b = append(p.b, opFalse)
		}
	case int:
		p.int(int64(x))
	case int64:
		p.int(x)
	case int32:
		p.int(int64(x))
	case float64:
		p.b = append(p.b, opBinFloat)
		p.b = binary.BigEndian.AppendUint64(p.b, math.Float64bits(x))
	case float32:
		return p.value(float64(x))
	case string:
		p.b = append(p.b, opBinUnicode)
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(len(x)))
		p.b = append(p.b, x...)
	case []any:
		p.b = append(p.b, opEmptyList)
		for i := 0; i < len(x); i += batch {
			p.b = append(p.b, opMark)
			for _, e := range x[i:min(i+batch, len(x))] {
				if err := p.value(e); err != nil {
					return err
				}
			}
			p.b = append(p.b, opAppends)
		}
	case []int32:
		return p.value(anys(x))
	case []int8:
		return p.value(anys(x))
	case []float32:
		return p.value(anys(x))
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the bytes do not depend on map order
		p.b = append(p.b, opEmptyDict)
		for i := 0; i < len(keys); i += batch {
			p.b = append(p.b, opMark)
			for _, k := range keys[i:min(i+batch, len(keys))] {
				if err := p.value(k); err != nil {
					return err
				}
				if err := p.value(x[k]); err != nil {
					return err
				}
			}
			p.b = append(p.b, opSetItems)
		}
	default:
		return fmt.Errorf("handoff: pickle: unsupported type %T", v)
	}
	return nil
}

// int writes BININT for 32-bit values, LONG1 otherwise.
func (p *pickler) int(x int64) {
	if x >= math.MinInt32 && x <= math.MaxInt32 {
		p.b = append(p.b, opBinInt)
		p.b = binary.LittleEndian.AppendUint32(p.b, uint32(int32(x)))
		return
	}
	p.b = append(p.b, opLong1, 8)
	p.b = binary.LittleEndian.AppendUint64(p.b, uint64(x))
}

// anys converts a numeric slice to []any for pickling.
func anys[T int8 | int16 | int32 | int64 | float32](xs []T) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		switch v := any(x).(type) {
		case float32:
			out[i] = float64(v)
		default:
			out[i] = int64(x)
		}
	}
	return out
}
