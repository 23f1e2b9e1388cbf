// bpe-vectors.js - writes the BPE test vectors of tests/data with the npm
// package `tiktoken` 1.0.22 (the WASM build of OpenAI's tiktoken), and counts
// where `js-tiktoken` 1.0.21 (a pure JavaScript port) differs. Not run by
// make check. To regenerate, in a scratch directory (not in the tree):
//   npm install tiktoken@1.0.22 js-tiktoken@1.0.21
//   node .../tests/data/bpe-vectors.js cl100k_base bpe-vectors-cl100k.txt
//   node .../tests/data/bpe-vectors.js o200k_base bpe-vectors-o200k.txt
// The strings are fixed plus seeded random mixtures, so the output is the
// same on every run.
const fs = require('fs');
const { get_encoding } = require('tiktoken');
const name = process.argv[2], outPath = process.argv[3];
const enc = get_encoding(name);
const jst = require('js-tiktoken');
const jenc = jst.getEncoding(name);

// Deterministic PRNG (xorshift32).
let seed = 0x9e3779b9;
function rnd() { seed ^= seed << 13; seed >>>= 0; seed ^= seed >>> 17; seed ^= seed << 5; seed >>>= 0; return seed; }
function pick(a) { return a[rnd() % a.length]; }

const fixed = [
  "", "a", " ", "  ", "\n", "\r\n", "\t", "hello", "Hello, world!", "hello world", " hello world ",
  "The quick brown fox jumps over the lazy dog.",
  "It's", "it's", "IT'S", "I'm", "I'M", "you're", "YOU'RE", "we've", "WE'VE", "he'd", "HE'D", "they'll", "THEY'LL",
  "don't", "DON'T", "can't", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "''s", "'S", "'Ll", "a'sb", "x'ſ", "'ſ",
  "Dog's bone", "the cat's", "rock'n'roll", "o'clock", "l'été", "’s curly", "it’s",
  "1", "12", "123", "1234", "12345", "123456789", "3.14159", "-42", "1,000,000", "1e10", "0x1F", "2026-12-01T15:59:23Z",
  "١٢٣٤٥", "３４５６", "²³", "ⅫⅪ", "½¼", "1st 2nd 3rd", "v1.2.3", "ipv4 192.168.0.1",
  "    ", "     x", "a    b", "a \n b", "\n\n\n", "\r\n\r\n", " \n", "\n ", "\t\tx", " \t \n", "x   ", "x\n", "x\n\n",
  "   \n   \n", "a\u00a0b", "a\u00a0 b", "\u3000x", "a\u0085b", "a\u2028b", "a\u2029b", "a\ufeffb", "a\u200bb", "\u180e",
  "a\u000bb", "a\u000cb", "\u000b\u000c", "a\u001cb", "\u0000", "a\u0000b",
  "{\"key\": \"value\", \"n\": 42, \"arr\": [1, 2, 3], \"ok\": true, \"nil\": null}",
  "{\n  \"name\": \"sift\",\n  \"version\": \"0.2.0\",\n  \"tags\": [\"llm\", \"sampling\"]\n}",
  "[{\"a\":1},{\"b\":[2,3]},{\"c\":{\"d\":\"e\"}}]", "\"\\u00e9\\n\\t\"", "{\"emoji\":\"😀\",\"cjk\":\"中文\"}",
  "int main(void) {\n    return 0;\n}\n", "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
  "def f(x):\n    return x ** 2  # square\n", "#include <stdio.h>\n", "x+=1;y-=2;z*=3;", "a->b->c", "if (a && b || !c) {}",
  "SELECT * FROM users WHERE id = 42;", "<div class=\"x\">Hello</div>", "https://example.com/path?q=1&r=2#frag",
  "/usr/local/bin/", "C:\\Windows\\System32", "foo_bar_baz", "camelCaseIdentifier", "HTTPServerError", "XMLHttpRequest",
  "ALLCAPS", "MixedCASEWords", "ÉCOLE", "École", "naïve café", "straße", "ΑΒΓ αβγ", "Привет, мир!", "ПРИВЕТ",
  "你好，世界！", "中文测试文本", "日本語のテキスト", "カタカナ", "한국어 텍스트", "ไทย ภาษา", "العربية نص", "עברית",
  "हिन्दी भाषा", "नमस्ते", "தமிழ்", "ქართული", "Ελληνικά", "Tiếng Việt", "e\u0301", "a\u0300\u0301\u0302", "\u0301x",
  "😀", "😀😁😂", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷🇩🇪", "❤️", "🤖 robot", "emoji😀text", "∑∫√∞", "→←↑↓", "€100", "$5.99", "£3", "¥",
  "!!!", "???", "...", "---", "***", "___", "==>", "<=>", "!=", "```python\nprint(1)\n```", "~~~", "@@", "##", "%%",
  "(a)", "[b]", "{c}", "<d>", "\"q\"", "'q'", "`q`", "a/b", "a//b", "a/\nb", "a/\n\nb", "x/\r\ny", "/*", "*/",
  "<|endoftext|>", "a<|endoftext|>b", "<|endoftext|><|endoftext|>", "<|endofprompt|>", "<|fim_prefix|>x<|fim_suffix|>",
  "<|endoftext", "|endoftext|>", "<|ENDOFTEXT|>",
  "\ufffd", "\ud800", "a\udfffb", "\uffff", "\u{10ffff}", "\u{1f600}\u{1f600}",
  "a".repeat(300), "ab".repeat(200), " ".repeat(200), " ".repeat(200) + "x", "\n".repeat(100), "1".repeat(100),
  "=".repeat(80), "-".repeat(120) + "\n", "中".repeat(100), "😀".repeat(40), "\t".repeat(50), " \n".repeat(60),
  "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
];

const frags = [
  "the", " the", "The", " and", "ing", " token", "izer", "s", "'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "’",
  " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "\u2028", "\u0085",
  "0", "7", "42", "123", "4567", "3.5", "-1", "1e-9", "١٢", "３", "²", "Ⅻ",
  "{", "}", "[", "]", "\"", ":", ",", "\":", "\": ", "{\"", "\"}", "null", "true", "false",
  "(", ")", ";", "=", "==", "+=", "->", "::", "//", "/*", "#", "!", "?", ".", "...", "/", "\\", "_", "-", "@", "$", "%",
  "é", "É", "ß", "ñ", "Ω", "ж", "Ж", "中", "文", "日本", "語", "한", "글", "ไทย", "ع", "ب", "हि", "न्", "\u0301", "\u0308",
  "😀", "👍", "🏽", "\u200d", "❤", "\ufe0f", "🇯", "🇵", "∑", "€",
  "HTTP", "Server", "JSON", "XML", "camel", "Case", "ALL", "CAPS", "x", "y", "z", "foo", "bar",
  "<|endoftext|>", "<|", "|>",
];

const cases = [];
for (const s of fixed) cases.push(s);
for (let i = 0; i < 280; i++) {
  const n = 1 + rnd() % 24;
  let s = "";
  for (let k = 0; k < n; k++) s += pick(frags);
  cases.push(s);
}
// Random code points from varied blocks.
const ranges = [[0x20, 0x7e], [0x0, 0x20], [0xa0, 0x24f], [0x300, 0x36f], [0x370, 0x4ff], [0x600, 0x6ff], [0x900, 0x97f],
  [0x3040, 0x30ff], [0x4e00, 0x9fff], [0xac00, 0xd7a3], [0x1f300, 0x1f6ff], [0x2000, 0x206f], [0xff00, 0xffef]];
for (let i = 0; i < 100; i++) {
  const n = 1 + rnd() % 30;
  let s = "";
  for (let k = 0; k < n; k++) { const r = pick(ranges); s += String.fromCodePoint(r[0] + rnd() % (r[1] - r[0] + 1)); }
  cases.push(s);
}

function hex(buf) { return Buffer.from(buf).toString('hex'); }
const lines = [];
let nOrd = 0, nSpec = 0, jsDiff = 0, skipped = 0;
const seen = new Set();
for (const s of cases) {
  const bytes = Buffer.from(s, 'utf8');
  const key = bytes.toString('hex');
  if (seen.has(key)) continue;
  seen.add(key);
  const ids = Array.from(enc.encode_ordinary(s));
  const back = Buffer.from(enc.decode(new Uint32Array(ids)));
  if (!back.equals(bytes)) { skipped++; continue; }
  lines.push(`o\t${key}\t${ids.join(' ')}`);
  nOrd++;
  const j = jenc.encode(s, [], []);
  if (j.join(' ') !== ids.join(' ')) jsDiff++;
  if (s.includes('<|')) {
    const sp = Array.from(enc.encode(s, 'all'));
    lines.push(`s\t${key}\t${sp.join(' ')}`);
    nSpec++;
  }
}
const head = [
  `# BPE test vectors for ${name}: produced by the npm package tiktoken 1.0.22`,
  `# (MIT; WASM build of OpenAI's tiktoken) with encode_ordinary (o lines) and`,
  `# encode(text, "all") (s lines: special tokens allowed). See README.md.`,
  `# Format: MODE TAB hex(utf-8 input bytes) TAB token ids separated by spaces.`,
];
fs.writeFileSync(outPath, head.join('\n') + '\n' + lines.join('\n') + '\n');
console.error(`${name}: ${nOrd} ordinary, ${nSpec} special, ${skipped} skipped (no round trip), js-tiktoken differs on ${jsDiff}`);
