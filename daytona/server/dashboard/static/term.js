// A small terminal of our own: a screen of cells that understands the
// ANSI basics (cursor moves, erase in line and display, SGR colours and
// bold/underline/inverse, the alternate screen as a clear), drawn as
// spans of classes (the CSP allows no inline styles), and a keyboard
// mapping to the bytes a terminal sends.

const blank = () => ({ ch: ' ', a: 0 });

// Attributes packed in a number: fg (0-17, 0 default) | bg << 5 | flags << 10.
const BOLD = 1 << 10;
const UNDER = 1 << 11;
const INV = 1 << 12;

// Screen is the terminal's state.
export class Screen {
  constructor(cols, rows) {
    this.resize(cols, rows);
    this.state = 'ground';
    this.params = '';
    this.attr = 0;
    this.saved = [0, 0];
  }

  resize(cols, rows) {
    const old = this.rows || [];
    this.cols = cols;
    this.nrows = rows;
    this.rows = [];
    for (let r = 0; r < rows; r++) {
      const src = old[old.length - rows + r] || [];
      const row = [];
      for (let c = 0; c < cols; c++) row.push(src[c] || blank());
      this.rows.push(row);
    }
    this.x = Math.min(this.x || 0, cols - 1);
    this.y = Math.min(this.y || 0, rows - 1);
  }

  // write feeds text (already decoded) to the screen.
  write(text) {
    for (const ch of text) this.feed(ch);
  }

  feed(ch) {
    switch (this.state) {
      case 'esc': return this.escape(ch);
      case 'csi': return this.csiChar(ch);
      case 'osc':
        if (ch === '\x07') this.state = 'ground';
        else if (ch === '\x1b') this.state = 'oscEsc';
        return undefined;
      case 'oscEsc': this.state = ch === '\\' ? 'ground' : 'osc'; return undefined;
      case 'charset': this.state = 'ground'; return undefined;
      default: return this.ground(ch);
    }
  }

  ground(ch) {
    switch (ch) {
      case '\x1b': this.state = 'esc'; return;
      case '\r': this.x = 0; return;
      case '\n': this.lineFeed(); return;
      case '\b': this.x = Math.max(0, this.x - 1); return;
      case '\t': this.x = Math.min(this.cols - 1, (Math.floor(this.x / 8) + 1) * 8); return;
      case '\x07': return;
      default:
        if (ch < ' ') return;
        if (this.x >= this.cols) { this.x = 0; this.lineFeed(); }
        this.rows[this.y][this.x] = { ch, a: this.attr };
        this.x++;
    }
  }

  lineFeed() {
    if (this.y === this.nrows - 1) {
      this.rows.shift();
      this.rows.push(Array.from({ length: this.cols }, blank));
    } else {
      this.y++;
    }
  }

  escape(ch) {
    this.state = 'ground';
    switch (ch) {
      case '[': this.state = 'csi'; this.params = ''; break;
      case ']': this.state = 'osc'; break;
      case '(': case ')': this.state = 'charset'; break;
      case '7': this.saved = [this.x, this.y]; break;
      case '8': [this.x, this.y] = this.saved; break;
      case 'c': this.eraseDisplay(2); this.x = this.y = 0; this.attr = 0; break;
      case 'M': if (this.y > 0) this.y--; break;
      default: break;
    }
  }

  csiChar(ch) {
    if ((ch >= '0' && ch <= '9') || ch === ';' || ch === '?' || ch === '>' || ch === '=') {
      this.params += ch;
      return;
    }
    this.state = 'ground';
    const priv = this.params.startsWith('?');
    const nums = this.params.replace(/^[?>=]/, '').split(';').map((n) => (n === '' ? NaN : Number(n)));
    const n = (i, d = 1) => (Number.isNaN(nums[i]) || nums[i] === undefined || nums[i] === 0 ? d : nums[i]);
    const clampX = (v) => Math.max(0, Math.min(this.cols - 1, v));
    const clampY = (v) => Math.max(0, Math.min(this.nrows - 1, v));
    switch (ch) {
      case 'A': this.y = clampY(this.y - n(0)); break;
      case 'B': this.y = clampY(this.y + n(0)); break;
      case 'C': this.x = clampX(this.x + n(0)); break;
      case 'D': this.x = clampX(this.x - n(0)); break;
      case 'G': this.x = clampX(n(0) - 1); break;
      case 'd': this.y = clampY(n(0) - 1); break;
      case 'H': case 'f': this.y = clampY(n(0) - 1); this.x = clampX(n(1) - 1); break;
      case 'J': this.eraseDisplay(Number.isNaN(nums[0]) ? 0 : nums[0]); break;
      case 'K': this.eraseLine(Number.isNaN(nums[0]) ? 0 : nums[0]); break;
      case 'P': { const row = this.rows[this.y]; row.splice(this.x, n(0)); while (row.length < this.cols) row.push(blank()); break; }
      case '@': { const row = this.rows[this.y]; row.splice(this.x, 0, ...Array.from({ length: n(0) }, blank)); row.length = this.cols; break; }
      case 'X': for (let i = 0; i < n(0) && this.x + i < this.cols; i++) this.rows[this.y][this.x + i] = blank(); break;
      case 'm': this.sgr(nums); break;
      case 's': this.saved = [this.x, this.y]; break;
      case 'u': [this.x, this.y] = this.saved; break;
      case 'h': case 'l':
        if (priv && (nums[0] === 1049 || nums[0] === 47)) { this.eraseDisplay(2); this.x = this.y = 0; }
        break;
      default: break;
    }
  }

  eraseLine(mode) {
    const row = this.rows[this.y];
    const [from, to] = mode === 1 ? [0, this.x + 1] : mode === 2 ? [0, this.cols] : [this.x, this.cols];
    for (let c = from; c < to && c < this.cols; c++) row[c] = blank();
  }

  eraseDisplay(mode) {
    if (mode === 2 || mode === 3) {
      this.rows = Array.from({ length: this.nrows }, () => Array.from({ length: this.cols }, blank));
      return;
    }
    this.eraseLine(mode);
    const rows = mode === 1 ? [0, this.y] : [this.y + 1, this.nrows];
    for (let r = rows[0]; r < rows[1]; r++) this.rows[r] = Array.from({ length: this.cols }, blank);
  }

  sgr(nums) {
    if (!nums.length) nums = [0];
    for (let i = 0; i < nums.length; i++) {
      const p = Number.isNaN(nums[i]) ? 0 : nums[i];
      let fg = this.attr & 31;
      let bg = (this.attr >> 5) & 31;
      let fl = this.attr & (BOLD | UNDER | INV);
      if (p === 0) { fg = 0; bg = 0; fl = 0; } else if (p === 1) fl |= BOLD;
      else if (p === 4) fl |= UNDER;
      else if (p === 7) fl |= INV;
      else if (p === 22) fl &= ~BOLD;
      else if (p === 24) fl &= ~UNDER;
      else if (p === 27) fl &= ~INV;
      else if (p >= 30 && p <= 37) fg = p - 29;
      else if (p === 39) fg = 0;
      else if (p >= 40 && p <= 47) bg = p - 39;
      else if (p === 49) bg = 0;
      else if (p >= 90 && p <= 97) fg = p - 81;
      else if (p >= 100 && p <= 107) bg = p - 91;
      else if (p === 38 || p === 48) { // 256 colours and RGB: the basic ones only
        const idx = nums[i + 1] === 5 ? nums[i + 2] : NaN;
        i += nums[i + 1] === 5 ? 2 : 4;
        if (idx >= 0 && idx < 16) { if (p === 38) fg = idx + 1; else bg = idx + 1; }
      }
      this.attr = fg | (bg << 5) | fl;
    }
  }

  // text returns the screen as lines of text.
  text() {
    return this.rows.map((r) => r.map((c) => c.ch).join('').trimEnd()).join('\n');
  }

  // render draws the screen into el, the cursor as a class.
  render(el, cursor = true) {
    const frag = document.createDocumentFragment();
    this.rows.forEach((row, y) => {
      const line = document.createElement('div');
      line.className = 'tline';
      let run = '';
      let runAttr = -1;
      const flush = () => {
        if (!run) return;
        const span = document.createElement('span');
        span.textContent = run;
        if (runAttr) span.className = classesOf(runAttr);
        line.append(span);
        run = '';
      };
      row.forEach((c, x) => {
        const a = cursor && x === this.x && y === this.y ? c.a | (1 << 15) : c.a;
        if (a !== runAttr) { flush(); runAttr = a; }
        run += c.ch;
      });
      flush();
      frag.append(line);
    });
    el.replaceChildren(frag);
  }
}

function classesOf(a) {
  const cls = [];
  let fg = a & 31;
  let bg = (a >> 5) & 31;
  if (a & INV) [fg, bg] = [bg || 8, fg || 1];
  if (fg) cls.push(`fg${fg - 1}`);
  if (bg) cls.push(`bg${bg - 1}`);
  if (a & BOLD) cls.push('bold');
  if (a & UNDER) cls.push('under');
  if (a & (1 << 15)) cls.push('cursor');
  return cls.join(' ');
}

// keyBytes returns what a terminal sends for a key event ('' for none).
export function keyBytes(ev) {
  const named = {
    Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b',
    ArrowUp: '\x1b[A', ArrowDown: '\x1b[B', ArrowRight: '\x1b[C', ArrowLeft: '\x1b[D',
    Home: '\x1b[H', End: '\x1b[F', Delete: '\x1b[3~', PageUp: '\x1b[5~', PageDown: '\x1b[6~',
  };
  if (named[ev.key]) return named[ev.key];
  if (ev.ctrlKey && !ev.altKey && ev.key.length === 1) {
    const c = ev.key.toUpperCase().charCodeAt(0);
    if (c >= 64 && c <= 95) return String.fromCharCode(c - 64);
    return '';
  }
  if (ev.key.length === 1 && !ev.metaKey) return ev.altKey ? `\x1b${ev.key}` : ev.key;
  return '';
}
