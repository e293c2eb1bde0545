//go:build !purego

#include "textflag.h"

// func firstWordSHANI(block *[64]byte) uint32
//
// The first word of the SHA-256 digest of a message that, padded, is the
// one block given: the initial hash values, 64 rounds with the SHA
// extensions, the initial values added back, and word A returned. A
// bucket position needs only those 4 bytes (flags.Position), so the other
// seven words are never written out.
//
// Registers: X0 the two rounds' message plus constants (SHA256RNDS2 reads
// it implicitly), X1 the state as A B E F and X2 as C D G H (dword 3 first),
// X3-X6 the message schedule's last four groups of four words, X7 scratch,
// X8 the byte-order mask.
//
// group(m3, m2, m1, m0) makes the next four words in m0, which holds the
// words 16 before them, from m1 (12 before), m2 (8) and m3 (4), as the
// schedule W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16] needs:
// SHA256MSG1 adds s0, the PALIGNR pair is W[t-7], SHA256MSG2 adds s1.
#define group(m3, m2, m1, m0) \
	SHA256MSG1 m1, m0 \
	MOVOU      m3, X7 \
	PALIGNR    $4, m2, X7 \
	PADDL      X7, m0 \
	SHA256MSG2 m3, m0

// rounds(m, k) runs four rounds on the words in m with constants at
// offset k of K: two rounds on the low half, two on the high. (K goes
// through a register: an SSE memory operand must be 16-byte aligned.)
#define rounds(m, k) \
	MOVOU       m, X0 \
	MOVOU       (k)(AX), X7 \
	PADDL       X7, X0 \
	SHA256RNDS2 X0, X1, X2 \
	PSHUFD      $0x0e, X0, X0 \
	SHA256RNDS2 X0, X2, X1

#define load(off, m) \
	MOVOU  (off)(DI), m \
	PSHUFB X8, m

TEXT ·firstWordSHANI(SB), NOSPLIT, $0-12
	MOVQ  block+0(FP), DI
	LEAQ  shaK<>(SB), AX
	MOVOU shaFlip<>(SB), X8
	MOVOU shaABEF<>(SB), X1
	MOVOU shaCDGH<>(SB), X2

	load(0, X3)
	rounds(X3, 0)
	load(16, X4)
	rounds(X4, 16)
	load(32, X5)
	rounds(X5, 32)
	load(48, X6)
	rounds(X6, 48)

	group(X6, X5, X4, X3)
	rounds(X3, 64)
	group(X3, X6, X5, X4)
	rounds(X4, 80)
	group(X4, X3, X6, X5)
	rounds(X5, 96)
	group(X5, X4, X3, X6)
	rounds(X6, 112)

	group(X6, X5, X4, X3)
	rounds(X3, 128)
	group(X3, X6, X5, X4)
	rounds(X4, 144)
	group(X4, X3, X6, X5)
	rounds(X5, 160)
	group(X5, X4, X3, X6)
	rounds(X6, 176)

	group(X6, X5, X4, X3)
	rounds(X3, 192)
	group(X3, X6, X5, X4)
	rounds(X4, 208)
	group(X4, X3, X6, X5)
	rounds(X5, 224)
	group(X5, X4, X3, X6)
	rounds(X6, 240)

	MOVOU  shaABEF<>(SB), X7
	PADDL  X7, X1
	PEXTRD $3, X1, AX
	MOVL   AX, ret+8(FP)
	RET

// func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// The initial hash values, dword 0 first: F E B A, then H G D C.
DATA shaABEF<>+0(SB)/4, $0x9b05688c
DATA shaABEF<>+4(SB)/4, $0x510e527f
DATA shaABEF<>+8(SB)/4, $0xbb67ae85
DATA shaABEF<>+12(SB)/4, $0x6a09e667
GLOBL shaABEF<>(SB), RODATA|NOPTR, $16

DATA shaCDGH<>+0(SB)/4, $0x5be0cd19
DATA shaCDGH<>+4(SB)/4, $0x1f83d9ab
DATA shaCDGH<>+8(SB)/4, $0xa54ff53a
DATA shaCDGH<>+12(SB)/4, $0x3c6ef372
GLOBL shaCDGH<>(SB), RODATA|NOPTR, $16

// Reverses the bytes of each dword: the message's words are big-endian.
DATA shaFlip<>+0(SB)/8, $0x0405060700010203
DATA shaFlip<>+8(SB)/8, $0x0c0d0e0f08090a0b
GLOBL shaFlip<>(SB), RODATA|NOPTR, $16

DATA shaK<>+0(SB)/4, $0x428a2f98
DATA shaK<>+4(SB)/4, $0x71374491
DATA shaK<>+8(SB)/4, $0xb5c0fbcf
DATA shaK<>+12(SB)/4, $0xe9b5dba5
DATA shaK<>+16(SB)/4, $0x3956c25b
DATA shaK<>+20(SB)/4, $0x59f111f1
DATA shaK<>+24(SB)/4, $0x923f82a4
DATA shaK<>+28(SB)/4, $0xab1c5ed5
DATA shaK<>+32(SB)/4, $0xd807aa98
DATA shaK<>+36(SB)/4, $0x12835b01
DATA shaK<>+40(SB)/4, $0x243185be
DATA shaK<>+44(SB)/4, $0x550c7dc3
DATA shaK<>+48(SB)/4, $0x72be5d74
DATA shaK<>+52(SB)/4, $0x80deb1fe
DATA shaK<>+56(SB)/4, $0x9bdc06a7
DATA shaK<>+60(SB)/4, $0xc19bf174
DATA shaK<>+64(SB)/4, $0xe49b69c1
DATA shaK<>+68(SB)/4, $0xefbe4786
DATA shaK<>+72(SB)/4, $0x0fc19dc6
DATA shaK<>+76(SB)/4, $0x240ca1cc
DATA shaK<>+80(SB)/4, $0x2de92c6f
DATA shaK<>+84(SB)/4, $0x4a7484aa
DATA shaK<>+88(SB)/4, $0x5cb0a9dc
DATA shaK<>+92(SB)/4, $0x76f988da
DATA shaK<>+96(SB)/4, $0x983e5152
DATA shaK<>+100(SB)/4, $0xa831c66d
DATA shaK<>+104(SB)/4, $0xb00327c8
DATA shaK<>+108(SB)/4, $0xbf597fc7
DATA shaK<>+112(SB)/4, $0xc6e00bf3
DATA shaK<>+116(SB)/4, $0xd5a79147
DATA shaK<>+120(SB)/4, $0x06ca6351
DATA shaK<>+124(SB)/4, $0x14292967
DATA shaK<>+128(SB)/4, $0x27b70a85
DATA shaK<>+132(SB)/4, $0x2e1b2138
DATA shaK<>+136(SB)/4, $0x4d2c6dfc
DATA shaK<>+140(SB)/4, $0x53380d13
DATA shaK<>+144(SB)/4, $0x650a7354
DATA shaK<>+148(SB)/4, $0x766a0abb
DATA shaK<>+152(SB)/4, $0x81c2c92e
DATA shaK<>+156(SB)/4, $0x92722c85
DATA shaK<>+160(SB)/4, $0xa2bfe8a1
DATA shaK<>+164(SB)/4, $0xa81a664b
DATA shaK<>+168(SB)/4, $0xc24b8b70
DATA shaK<>+172(SB)/4, $0xc76c51a3
DATA shaK<>+176(SB)/4, $0xd192e819
DATA shaK<>+180(SB)/4, $0xd6990624
DATA shaK<>+184(SB)/4, $0xf40e3585
DATA shaK<>+188(SB)/4, $0x106aa070
DATA shaK<>+192(SB)/4, $0x19a4c116
DATA shaK<>+196(SB)/4, $0x1e376c08
DATA shaK<>+200(SB)/4, $0x2748774c
DATA shaK<>+204(SB)/4, $0x34b0bcb5
DATA shaK<>+208(SB)/4, $0x391c0cb3
DATA shaK<>+212(SB)/4, $0x4ed8aa4a
DATA shaK<>+216(SB)/4, $0x5b9cca4f
DATA shaK<>+220(SB)/4, $0x682e6ff3
DATA shaK<>+224(SB)/4, $0x748f82ee
DATA shaK<>+228(SB)/4, $0x78a5636f
DATA shaK<>+232(SB)/4, $0x84c87814
DATA shaK<>+236(SB)/4, $0x8cc70208
DATA shaK<>+240(SB)/4, $0x90befffa
DATA shaK<>+244(SB)/4, $0xa4506ceb
DATA shaK<>+248(SB)/4, $0xbef9a3f7
DATA shaK<>+252(SB)/4, $0xc67178f2
GLOBL shaK<>(SB), RODATA|NOPTR, $256
