// Escaping for the HTML report (render_html.h). Follows the HTML standard's rules for where
// text may end a context: in text and quoted attribute values only & < > " ' matter; in a
// <script> data block only "</script" and "<!--" do, so < (and > &, U+2028/U+2029 for
// JavaScript engines that would parse the block as code) become JSON \u escapes.
#include "render_html.h"

#include "text_escape.h"

namespace laggard::report {

std::string escape_html(std::string_view s) {
  const std::string visible = escape_text(s);
  std::string out;
  out.reserve(visible.size() + visible.size() / 8);
  for (char c : visible) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string escape_script_json(std::string_view s) {
  std::string out;
  out.reserve(s.size() + s.size() / 16);
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (c == '<') out += "\\u003c";
    else if (c == '>') out += "\\u003e";
    else if (c == '&') out += "\\u0026";
    else if (c == '\xe2' && i + 2 < s.size() && s[i + 1] == '\x80' && (s[i + 2] == '\xa8' || s[i + 2] == '\xa9')) {
      out += s[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";  // LINE / PARAGRAPH SEPARATOR
      i += 2;
    } else out += c;
  }
  return out;
}

}  // namespace laggard::report
