# gen.py: turn kernels.cu into host C++ run by a fiber emulator, plus a
# dispatcher that unpacks 8-byte launch arguments by parameter type.
import re, sys
src = open(sys.argv[1]).read()
src = src.replace('#include <__clang_cuda_builtin_vars.h>', '#include "emu_rt.h"')
src = re.sub(r'#define __global__ .*\n', '', src)
src = re.sub(r'#define __device__ .*\n', '', src)
src = re.sub(r'#define __shared__ .*\n', '', src)
kernels = re.findall(r'KERNEL void (\w+)\(([^)]*)\)', src)
out = [src, '\n// ---- dispatcher ----\n', 'extern "C" int emu_launch(const char* name, unsigned gx, unsigned gy, unsigned bx, const unsigned long long* a) {']
for name, params in kernels:
    ps = [p.strip() for p in params.replace('\n', ' ').split(',')]
    args = []
    for i, p in enumerate(ps):
        ty = p.rsplit(' ', 1)[0].strip()
        if '*' in ty:
            args.append('(%s)(uintptr_t)a[%d]' % (ty, i))
        elif ty == 'double':
            args.append('__builtin_bit_cast(double, a[%d])' % i)
        elif ty == 'i64':
            args.append('(i64)a[%d]' % i)
        else:
            raise SystemExit('unknown type ' + ty)
    out.append('  if (!strcmp(name, "%s")) { emu_run(gx, gy, bx, [&]{ %s(%s); }); return %d; }' % (name, name, ', '.join(args), len(ps)))
out.append('  return -1;\n}\n')
open(sys.argv[2], 'w').write('\n'.join(out))
