"""What an LMS file looks like in the instructor's language: Moodle's worksheet headers, the
column separator and the decimal separator.

Moodle writes the grading worksheet (Assignment, View all submissions, Download grading
worksheet) with its column names in the language of the person who downloads it, and its
importer finds the columns by the same translated names (mod/assign/feedback/offline: the
strings ``recordid``, ``grade`` and ``lastmodifiedgrade``). So a worksheet is read by the names
of any language below, and the import file is written back with the worksheet's own header,
untouched. The names are those of Moodle's language packs (assign.php, moodle.php and
assignfeedback_comments.php); a language may have had more than one wording over the years.

Canvas exports its gradebook with ``;`` between columns where the user's locale writes decimals
with a comma (``12,5``); Moodle puts such numbers in quotes. A file is written back with the
separators it was read with.
"""

from __future__ import annotations

import re

# column -> language -> the names Moodle has used for it
MOODLE_HEADERS: dict[str, dict[str, tuple[str, ...]]] = {
    "identifier": {"en": ("Identifier",), "de": ("ID", "Kennung"), "fr": ("Identifiant", "ID"),
                   "es": ("Identificador",), "pt": ("Identificador",)},
    "full_name": {"en": ("Full name",), "de": ("Vollständiger Name", "Vollständiger Name (angezeigt)"),
                  "fr": ("Nom complet",), "es": ("Nombre completo",), "pt": ("Nome completo",)},
    "email": {"en": ("Email address",), "de": ("E-Mail-Adresse", "E-Mail Adresse"),
              "fr": ("Adresse de courriel", "Adresse courriel", "Adresse email"),
              "es": ("Dirección de correo", "Dirección Email", "Dirección de correo electrónico"),
              "pt": ("Endereço de email", "Endereço de e-mail", "Endereço de correio eletrónico")},
    "status": {"en": ("Status",), "de": ("Status",), "fr": ("Statut",), "es": ("Estado", "Estatus"),
               "pt": ("Status", "Estado")},
    "grade": {"en": ("Grade",), "de": ("Bewertung",), "fr": ("Note",), "es": ("Calificación",),
              "pt": ("Nota",)},
    "maximum": {"en": ("Maximum Grade", "Maximum grade"), "de": ("Bestwertung", "Maximale Bewertung"),
                "fr": ("Note maximale",), "es": ("Calificación máxima",), "pt": ("Nota máxima",)},
    "can_change": {"en": ("Grade can be changed",), "de": ("Bewertung kann geändert werden",),
                   "fr": ("La note peut être modifiée",),
                   "es": ("La calificación puede ser cambiada", "La calificación puede cambiarse"),
                   "pt": ("Nota pode ser alterada", "A nota pode ser alterada", "A nota pode ser alterada.")},
    "modified_submission": {"en": ("Last modified (submission)",), "de": ("Zuletzt geändert (Abgabe)",),
                            "fr": ("Dernière modification (travail remis)",),
                            "es": ("Última modificación (entrega)", "Última modificación (envío)"),
                            "pt": ("Última modificação (envio)", "Última modificação (submissão)")},
    "modified_grade": {"en": ("Last modified (grade)",), "de": ("Zuletzt geändert (Bewertung)",),
                       "fr": ("Dernière modification (note)",), "es": ("Última modificación (calificación)",),
                       "pt": ("Última modificação (nota)", "Última modificação (avaliação)")},
    "comments": {"en": ("Feedback comments",), "de": ("Feedback als Kommentar", "Feedback-Kommentare"),
                 "fr": ("Commentaires de feedback", "Commentaires en feedback"),
                 "es": ("Comentarios de retroalimentación", "Comentarios de realimentación"),
                 "pt": ("Comentários de feedback", "Comentários do feedback")},
}
MOODLE_REQUIRED = ("identifier", "full_name", "grade")  # what the grader needs to match and fill a row
LANGUAGES = ("en", "de", "fr", "es", "pt")

# How Moodle's Status column says a submission came in late ("Submitted for grading - 2 days 3 hours
# late"): the string ``submittedlateshort`` ("{$a} late") of each language.
LATE_WORDS = {"en": r"\blate\b", "de": r"zu spät|verspätet", "fr": r"en retard", "es": r"después|de retraso|tarde",
              "pt": r"atrasad[oa]|fora de prazo|em atraso"}
_LATE = re.compile("|".join(f"(?:{w})" for w in LATE_WORDS.values()), re.IGNORECASE)
_DECIMAL_COMMA = re.compile(r"^\s*-?\d+,\d+\s*$")


def _key(name: str) -> str:
    return " ".join(name.split()).casefold()


_BY_NAME: dict[str, tuple[str, str]] = {}  # a header as read -> (column, language)
for _column, _names in MOODLE_HEADERS.items():
    for _language, _spellings in _names.items():
        for _spelling in _spellings:
            _BY_NAME.setdefault(_key(_spelling), (_column, _language))
# "ID" and "Status" are shared by several languages: the other columns decide the language


def moodle_columns(header: list[str]) -> tuple[dict[str, str], str]:
    """The worksheet's columns by what they hold (``{"grade": "Bewertung", ...}``) and its language."""
    columns: dict[str, str] = {}
    votes: dict[str, int] = {}
    for name in header:
        found = _BY_NAME.get(_key(name))
        if found is None or found[0] in columns:
            continue
        column, _ = found
        columns[column] = name
        for language, spellings in MOODLE_HEADERS[column].items():
            if _key(name) in {_key(s) for s in spellings}:
                votes[language] = votes.get(language, 0) + 1
    language = max(LANGUAGES, key=lambda lang: (votes.get(lang, 0), lang == "en"))
    return columns, language


def expected_moodle_headers() -> str:
    """The names a Moodle worksheet's required columns have, per language, for an error message."""
    return "; ".join(f"{lang}: " + ", ".join(MOODLE_HEADERS[c][lang][0] for c in MOODLE_REQUIRED)
                     for lang in LANGUAGES)


def is_late(status: str) -> bool:
    """True when a Moodle Status cell says the submission came in late, in any language above."""
    return bool(_LATE.search(status or ""))


def sniff_delimiter(first_line: str) -> str:
    """The column separator of a CSV header line: ``;``, a tab or ``,`` (the most frequent outside quotes)."""
    outside = re.sub(r'"[^"]*"', "", first_line)
    counts = {d: outside.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=lambda d: (counts[d], d == ","))
    return best if counts[best] else ","


def decimal_of(cells: list[str], delimiter: str) -> str:
    """The decimal separator numbers are written with: a comma when a number cell has one (``100,00``),
    else a comma for a ``;``-separated file with no decimals shown, else a point."""
    if any(_DECIMAL_COMMA.match(c or "") for c in cells):
        return ","
    if any(re.match(r"^\s*-?\d+\.\d+\s*$", c or "") for c in cells):
        return "."
    return "," if delimiter == ";" else "."


def parse_number(text: str | None) -> float | None:
    """A number as an LMS writes it, with a decimal point or a decimal comma; None if it is not one."""
    cell = (text or "").strip()
    if _DECIMAL_COMMA.match(cell):
        cell = cell.replace(",", ".")
    try:
        return float(cell)
    except ValueError:
        return None


def format_number(x: float, decimal: str = ".") -> str:
    """``x`` to two places at most, with the file's decimal separator."""
    text = f"{round(x, 2):g}"
    return text.replace(".", decimal) if decimal != "." else text
