package remote

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// routeTable is the routed experts of a generation as the server sends them:
// rows x layers x k expert ids, row-major. Row i is the routing of the
// forward pass whose input is token i of prompt+completion, so there are
// len(prompt)+len(completion)-1 rows: the last sampled token was never fed
// back through the model.
type routeTable struct {
	rows, layers, k int
	ids             []int32
}

func (t routeTable) at(row, layer, slot int) int32 {
	return t.ids[(row*t.layers+layer)*t.k+slot]
}

// concat appends u's rows to t's (vLLM releases that split prompt and
// completion routes into two fields).
func (t routeTable) concat(u routeTable) (routeTable, error) {
	if t.rows == 0 {
		return u, nil
	}
	if u.rows == 0 {
		return t, nil
	}
	if t.layers != u.layers || t.k != u.k {
		return routeTable{}, fmt.Errorf("prompt routes are [%d][%d], completion routes [%d][%d]", t.layers, t.k, u.layers, u.k)
	}
	return routeTable{rows: t.rows + u.rows, layers: t.layers, k: t.k, ids: append(append([]int32(nil), t.ids...), u.ids...)}, nil
}

// decodeBase64 accepts standard base64 with or without padding.
func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	return base64.RawStdEncoding.DecodeString(s)
}

// decodeNPYRoutes reads vLLM's routed_experts: base64 of a NumPy .npy file
// (np.save of an array of shape (tokens-1, layers, k), dtype uint8, uint16
// or int32 depending on the release).
func decodeNPYRoutes(b64 string) (routeTable, error) {
	raw, err := decodeBase64(b64)
	if err != nil {
		return routeTable{}, fmt.Errorf("routed experts: base64: %v", err)
	}
	shape, vals, err := decodeNPY(raw)
	if err != nil {
		return routeTable{}, fmt.Errorf("routed experts: %v", err)
	}
	if len(shape) != 3 {
		return routeTable{}, fmt.Errorf("routed experts: shape %v, want (tokens, layers, k)", shape)
	}
	return routeTable{rows: shape[0], layers: shape[1], k: shape[2], ids: vals}, nil
}

// decodeRawRoutes reads SGLang's meta_info.routed_experts: base64 of the
// flattened int32 array (tokens-1, layers, k), native (little-endian) byte
// order, with no shape; k must be known to split a row into layers.
func decodeRawRoutes(b64 string, rows, k int) (routeTable, error) {
	raw, err := decodeBase64(b64)
	if err != nil {
		return routeTable{}, fmt.Errorf("routed experts: base64: %v", err)
	}
	if len(raw)%4 != 0 {
		return routeTable{}, fmt.Errorf("routed experts: %d bytes is not a whole number of int32", len(raw))
	}
	n := len(raw) / 4
	if rows <= 0 || k <= 0 || n%(rows*k) != 0 {
		return routeTable{}, fmt.Errorf("routed experts: %d ids do not split into %d rows of k=%d", n, rows, k)
	}
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return routeTable{rows: rows, layers: n / (rows * k), k: k, ids: ids}, nil
}

// decodeNPY parses a NumPy .npy file (format versions 1.0 to 3.0) holding a
// C-order integer array and returns its shape and values. Little-endian and
// single-byte integer dtypes are supported, which is what numpy writes on
// the x86 and ARM hosts that run vLLM.
func decodeNPY(b []byte) (shape []int, vals []int32, err error) {
	const magic = "\x93NUMPY"
	if len(b) < len(magic)+4 || string(b[:len(magic)]) != magic {
		return nil, nil, errors.New("not a .npy file")
	}
	major := b[len(magic)]
	p := len(magic) + 2
	var hlen int
	switch major {
	case 1:
		hlen = int(binary.LittleEndian.Uint16(b[p:]))
		p += 2
	case 2, 3:
		if len(b) < p+4 {
			return nil, nil, errors.New(".npy header cut short")
		}
		hlen = int(binary.LittleEndian.Uint32(b[p:]))
		p += 4
	default:
		return nil, nil, fmt.Errorf(".npy format version %d not supported", major)
	}
	if hlen < 0 || len(b)-p < hlen {
		return nil, nil, errors.New(".npy header cut short")
	}
	header := string(b[p : p+hlen])
	data := b[p+hlen:]

	descr, err := npyField(header, "descr")
	if err != nil {
		return nil, nil, err
	}
	descr = strings.Trim(descr, `'" `)
	fortran, err := npyField(header, "fortran_order")
	if err != nil {
		return nil, nil, err
	}
	if strings.TrimSpace(fortran) != "False" {
		return nil, nil, errors.New(".npy array in Fortran order not supported")
	}
	shapeText, err := npyField(header, "shape")
	if err != nil {
		return nil, nil, err
	}
	shape, count, err := npyShape(shapeText)
	if err != nil {
		return nil, nil, err
	}
	size, signed, err := npyDType(descr)
	if err != nil {
		return nil, nil, err
	}
	if count > math.MaxInt/size || len(data) != count*size {
		return nil, nil, fmt.Errorf(".npy data is %d bytes, shape %v of %s needs %d", len(data), shape, descr, count*size)
	}
	vals = make([]int32, count)
	for i := range vals {
		var v int64
		switch {
		case size == 1 && signed:
			v = int64(int8(data[i]))
		case size == 1:
			v = int64(data[i])
		case size == 2 && signed:
			v = int64(int16(binary.LittleEndian.Uint16(data[2*i:])))
		case size == 2:
			v = int64(binary.LittleEndian.Uint16(data[2*i:]))
		case size == 4 && signed:
			v = int64(int32(binary.LittleEndian.Uint32(data[4*i:])))
		case size == 4:
			v = int64(binary.LittleEndian.Uint32(data[4*i:]))
		case signed:
			v = int64(binary.LittleEndian.Uint64(data[8*i:]))
		default:
			u := binary.LittleEndian.Uint64(data[8*i:])
			if u > math.MaxInt64 {
				return nil, nil, fmt.Errorf(".npy value %d out of range", u)
			}
			v = int64(u)
		}
		if v < math.MinInt32 || v > math.MaxInt32 {
			return nil, nil, fmt.Errorf(".npy value %d out of range", v)
		}
		vals[i] = int32(v)
	}
	return shape, vals, nil
}

// npyField finds key's value in the header, a Python dict literal such as
// {'descr': '<i4', 'fortran_order': False, 'shape': (3, 2, 2), }.
func npyField(header, key string) (string, error) {
	i := strings.Index(header, "'"+key+"'")
	if i < 0 {
		return "", fmt.Errorf(".npy header has no %s", key)
	}
	rest := strings.TrimLeft(header[i+len(key)+2:], " ")
	if !strings.HasPrefix(rest, ":") {
		return "", fmt.Errorf(".npy header: bad %s", key)
	}
	rest = strings.TrimLeft(rest[1:], " ")
	if strings.HasPrefix(rest, "(") {
		end := strings.IndexByte(rest, ')')
		if end < 0 {
			return "", errors.New(".npy header: unterminated shape")
		}
		return rest[:end+1], nil
	}
	end := strings.IndexAny(rest, ",}")
	if end < 0 {
		return "", fmt.Errorf(".npy header: bad %s", key)
	}
	return rest[:end], nil
}

func npyShape(s string) (shape []int, count int, err error) {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(s), "("), ")")
	count = 1
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, 0, fmt.Errorf(".npy header: bad shape (%s)", s)
		}
		if n > 0 && count > math.MaxInt32/n {
			return nil, 0, fmt.Errorf(".npy header: shape (%s) too large", s)
		}
		shape = append(shape, n)
		count *= n
	}
	return shape, count, nil
}

func npyDType(descr string) (size int, signed bool, err error) {
	if len(descr) != 3 || (descr[0] != '<' && descr[0] != '|') {
		return 0, false, fmt.Errorf(".npy dtype %q not supported", descr)
	}
	switch descr[1] {
	case 'i':
		signed = true
	case 'u':
	default:
		return 0, false, fmt.Errorf(".npy dtype %q not supported", descr)
	}
	switch descr[2] {
	case '1', '2', '4', '8':
		size = int(descr[2] - '0')
	default:
		return 0, false, fmt.Errorf(".npy dtype %q not supported", descr)
	}
	if descr[0] == '|' && size != 1 {
		return 0, false, fmt.Errorf(".npy dtype %q not supported", descr)
	}
	return size, signed, nil
}
