// Image files crafted byte by byte for the image-budget tests (images.test.mjs): small files that
// declare or cost far more than their size.
//
// tests/fuzz/corpus/image/scans.jpg (the decoders' unit tests and fuzz seed) is
// progressiveJpeg(16, 16, 150) from here.

// A GIF whose logical screen is w x h pixels around a 1x1 frame: 35 bytes that decode to a
// w x h image (the screen is filled with the background colour).
export function gifBomb(w, h) {
  const b = [];
  const u16 = (v) => b.push(v & 0xff, v >> 8);
  b.push(...Buffer.from('GIF89a'));
  u16(w); u16(h);
  b.push(0x80, 0, 0);                // a global colour table of 2 entries
  b.push(0, 0, 0, 255, 255, 255);
  b.push(0x2c); u16(0); u16(0); u16(1); u16(1); b.push(0);  // the 1x1 frame
  b.push(2, 2, 0x44, 0x01, 0);       // LZW minimum code size 2, one sub-block, end
  b.push(0x3b);
  return Buffer.from(b);
}

// MSB-first bit writer for JPEG entropy data: pads the last byte with 1s and stuffs a 0 after
// every 0xFF, as the format requires.
class Bits {
  constructor() { this.out = []; this.acc = 0; this.n = 0; }
  put(value, len) {
    for (let i = len - 1; i >= 0; i--) {
      this.acc = (this.acc << 1) | ((value >> i) & 1);
      if (++this.n === 8) this.flushByte();
    }
  }
  flushByte() {
    this.out.push(this.acc);
    if (this.acc === 0xff) this.out.push(0);
    this.acc = 0; this.n = 0;
  }
  end() {
    while (this.n !== 0) this.put(1, 1);
    return this.out;
  }
}

// A progressive greyscale JPEG of w x h (flat grey) with one DC scan and `scans - 1` AC scans of
// the same band. libjpeg reads every scan (a repeated band is not an error), each one a pass
// over all the image's blocks, while the file stays small: each AC scan is a few end-of-band
// runs of up to 32767 blocks.
export function progressiveJpeg(w, h, scans) {
  const b = [];
  const marker = (code, payload) => {
    b.push(0xff, code, (payload.length + 2) >> 8, (payload.length + 2) & 0xff, ...payload);
  };
  b.push(0xff, 0xd8);                                       // SOI
  marker(0xdb, [0, ...new Array(64).fill(1)]);              // DQT 0: all ones
  marker(0xc2, [8, h >> 8, h & 0xff, w >> 8, w & 0xff, 1, 1, 0x11, 0]);  // SOF2, 1 component
  const counts = (len, n) => { const c = new Array(16).fill(0); c[len - 1] = n; return c; };
  marker(0xc4, [0x00, ...counts(1, 1), 0x00]);              // DC table 0: category 0 = "0"
  const eobSymbols = Array.from({ length: 15 }, (_, r) => r << 4);  // EOB runs of 2^r.. blocks
  marker(0xc4, [0x10, ...counts(4, 15), ...eobSymbols]);    // AC table 0: 4-bit codes 0..14
  const blocks = Math.ceil(w / 8) * Math.ceil(h / 8);
  // DC scan: every block's difference is 0 (a 1-bit code each)
  marker(0xda, [1, 1, 0x00, 0, 0, 0]);
  const dc = new Bits();
  for (let i = 0; i < blocks; i++) dc.put(0, 1);
  for (const x of dc.end()) b.push(x);  // (a spread of ~10^5 arguments would overflow)
  for (let s = 1; s < scans; s++) {
    marker(0xda, [1, 1, 0x00, 1, 63, 0]);                   // AC 1..63, successive approx 0
    const ac = new Bits();
    for (let left = blocks; left > 0;) {
      const run = Math.min(left, 32767);
      const r = 31 - Math.clz32(run);                       // EOBr: 2^r + r extra bits
      ac.put(r, 4);
      if (r > 0) ac.put(run - (1 << r), r);
      left -= run;
    }
    for (const x of ac.end()) b.push(x);
  }
  b.push(0xff, 0xd9);                                       // EOI
  return Buffer.from(b);
}
