// Force-included in every C++ file: fmt's formatting core runs from libfmt, not a copy per file.
#pragma once
// fmt 9 (Debian 12's libfmt-dev) declares only its locale helpers extern, so each file that logs
// with spdlog or calls fmt::format_to instantiates detail::vformat_to<char> and, through it, every
// integer and floating-point writer, then optimizes them at -O3: about half of such a file's
// compile time. libfmt.so exports that very instantiation, built from the same fmt 9 sources;
// declaring it extern makes each file call it instead. fmt 10 and later declare it themselves.
#include <fmt/format.h>

#if FMT_VERSION >= 90000 && FMT_VERSION < 100000 && !defined(FMT_HEADER_ONLY)
namespace fmt {
inline namespace v9 {
namespace detail {
extern template FMT_API void vformat_to<char>(buffer<char>&, basic_string_view<char>,
                                              basic_format_args<buffer_context<char>>, locale_ref);
} // namespace detail
} // namespace v9
} // namespace fmt
#endif
