"""LMS files that cannot surprise: what Canvas and Moodle hand the grader, read in every form they
come in, and an import file that changes nothing the instructor did not mean to change.

Each test reproduces a problem an instructor met (issue 30) and fails on the code before the fix:
a Canvas assignment worth 100 imported as 14-point raw scores; semicolon exports with decimal
commas; Moodle worksheets in German, French, Spanish and Portuguese; a comment typed after the
grader's summary lost on the next import; 33% shown to every learner before hand grading.
No learner code runs here.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from lessonlib.grading import records as r
from lessonlib.grading.isolation.sandbox import Isolation, Limits
from lessonlib.grading.lms.roster import (
    LATE_NOTE,
    RosterError,
    lms_import_text,
    mark_late,
    match,
    read_roster,
    write_lms_import,
)
from lessonlib.grading.lms.submissions import Learner
from lessonlib.grading.reports.gradebook import write_gradebook

CANVAS_HEADER = "Student,ID,SIS User ID,SIS Login ID,Section,Attention homework (98765),Current Score\n"


def _result(key: str, lms_id: str, points: float, *, most: float = 4.0, written: bool = False) -> r.LearnerResult:
    status = "passed" if points == most else "failed"
    grades = [r.ExerciseGrade("02_masking.ipynb", "causal_mask", points, most, status)]
    if written:
        grades.append(r.ExerciseGrade("05_interpretation.ipynb", "q1_explain", None, 2.0, r.NEEDS_MANUAL,
                                      kind="manual"))
    return r.LearnerResult(key, key, "f", "bubblewrap", "now", grades, lms_id=lms_id)


def _rows(text: str, delimiter: str = ",") -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text), delimiter=delimiter))


# --- Canvas: points possible, semicolons ------------------------------------------------------------


def test_a_canvas_assignment_worth_100_gets_grades_scaled_to_100(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.csv"
    path.write_text(CANVAS_HEADER + "    Points Possible,,,,,100,\n\"Smith, Bob\",340934,S1,bsmith,A,,50\n"
                    "\"Jones, Amy\",412233,S2,ajones,A,,60\n")
    roster = read_roster(path, "Attention homework")
    assert roster.points_possible == 100
    matched = match(roster, [_result("bob", "340934", 7, most=14), _result("amy", "412233", 14, most=14)])
    out = tmp_path / "out"
    out.mkdir()
    written, _ = write_lms_import(out, roster, matched, 14)
    rows = _rows(written.read_text())
    # before: Points Possible 14 and raw points 7, which Canvas reads as 7 of 100
    assert [(row["ID"], row["Attention homework (98765)"]) for row in rows] == [("", "100"), ("340934", "50"),
                                                                               ("412233", "100")]
    assert any("worth 100 points" in note and "scales every grade to 100" in note for note in roster.notes)


def test_a_new_canvas_column_is_worth_the_assignment_s_points(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.csv"
    path.write_text(CANVAS_HEADER + "    Points Possible,,,,,100,\n\"Smith, Bob\",340934,S1,bsmith,A,,50\n")
    roster = read_roster(path, "Week 3 lab", new_column=True)
    assert roster.new_column and roster.points_possible is None
    lines = lms_import_text(roster, match(roster, [_result("bob", "340934", 7, most=14)]), 14).splitlines()
    assert lines[1:] == ["    Points Possible,,,,,14", '"Smith, Bob",340934,S1,bsmith,A,7']


def test_a_semicolon_canvas_export_with_decimal_commas_is_read_and_written_back_alike(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.csv"
    path.write_text(CANVAS_HEADER.replace(",", ";") + "    Points Possible;;;;;10,00;\n"
                    "\"Smith; Bob\";340934;S1;bsmith;A;;50,5\n\"Jones, Amy\";412233;S2;ajones;A;2,5;60\n")
    roster = read_roster(path, "Attention homework")  # before: refused, no column Student
    assert (roster.kind, roster.delimiter, roster.decimal, roster.points_possible) == ("canvas", ";", ",", 10)
    assert roster.column == "Attention homework (98765)"
    matched = match(roster, [_result("bob", "340934", 3.5), _result("amy", "412233", 1)])
    assert [roster.learner_name(row) for row, _ in matched.pairs] == ["Smith; Bob", "Jones, Amy"]
    lines = lms_import_text(roster, matched, 4).splitlines()
    assert lines == ["Student;ID;SIS User ID;SIS Login ID;Section;Attention homework (98765)",
                     "    Points Possible;;;;;10", '"Smith; Bob";340934;S1;bsmith;A;8,75',
                     "Jones, Amy;412233;S2;ajones;A;2,5"]


# --- Moodle: five languages, decimal commas, late status ----------------------------------------------

WORKSHEETS = {  # header, participant word, a late status, as Moodle writes them in each language
    "en": ("Identifier,Full name,Email address,Status,Grade,Maximum Grade,Grade can be changed,"
           "Last modified (submission),Last modified (grade),Feedback comments",
           "Participant", "Submitted for grading - 2 days 3 hours late"),
    "de": ("ID,Vollständiger Name,E-Mail-Adresse,Status,Bewertung,Bestwertung,Bewertung kann geändert werden,"
           "Zuletzt geändert (Abgabe),Zuletzt geändert (Bewertung),Feedback als Kommentar",
           "Teilnehmer/in", "Zur Bewertung abgegeben - 2 Tage 3 Stunden zu spät"),
    "fr": ("Identifiant,Nom complet,Adresse de courriel,Statut,Note,Note maximale,La note peut être modifiée,"
           "Dernière modification (travail remis),Dernière modification (note),Commentaires de feedback",
           "Participant", "Remis pour évaluation - 2 jours 3 heures en retard"),
    "es": ("Identificador,Nombre completo,Dirección de correo,Estado,Calificación,Calificación máxima,"
           "La calificación puede ser cambiada,Última modificación (entrega),Última modificación (calificación),"
           "Comentarios de retroalimentación",
           "Participante", "Enviado para calificar - 2 días 3 horas después"),
    "pt": ("Identificador,Nome completo,Endereço de email,Status,Nota,Nota máxima,Nota pode ser alterada,"
           "Última modificação (envio),Última modificação (nota),Comentários de feedback",
           "Participante", "Enviado para avaliação - 2 dias 3 horas atrasado"),
}


@pytest.mark.parametrize("language", sorted(WORKSHEETS))
def test_moodle_worksheets_in_five_languages_with_decimal_commas(tmp_path: Path, language: str) -> None:
    header, participant, late = WORKSHEETS[language]
    path = tmp_path / "worksheet.csv"
    path.write_text("\ufeff" + header + "\n"
                    f'{participant} 1001,Bob Smith,bob@example.org,{late},,"100,00",Yes,-,-,<p>Well done.</p>\n'
                    f'{participant} 1004,Dee Missing,dee@example.org,-,"80,00","100,00",Yes,-,-,\n')
    roster = read_roster(path, None)  # before: refused unless English
    assert (roster.kind, roster.language, roster.decimal) == ("moodle", language, ",")
    assert roster.column == header.split(",")[4]
    assert roster.late_ids() == {"1001"}
    text = lms_import_text(roster, match(roster, [_result("Bob Smith", "1001", 3.5)]), 4)
    assert text.splitlines()[0] == header  # written back in the worksheet's language
    bob, dee = _rows(text)
    grade, comments = header.split(",")[4], header.split(",")[-1]
    assert (bob[grade], dee[grade]) == ("87,5", "")  # 3.5 of 4 scaled to "100,00"; Dee's 80 left alone
    assert bob[comments].startswith("<p>Well done.</p> Automatic grading: 3.5 / 4 points")
    assert bob[header.split(",")[5]] == "100,00"


def test_an_unknown_worksheet_header_names_what_was_found_and_what_is_expected(tmp_path: Path) -> None:
    path = tmp_path / "worksheet.csv"
    path.write_text("Kennnummer,Vollständiger Name,Punkte\nTeilnehmer/in 1,Bob,3\n")
    with pytest.raises(RosterError) as info:
        read_roster(path, None)
    message = str(info.value)
    assert "its columns are: Kennnummer, Vollständiger Name, Punkte" in message
    assert "full_name (Vollständiger Name) only" in message
    for expected in ("Identifier, Full name, Grade", "de: ID, Vollständiger Name, Bewertung", "fr: Identifiant",
                     "es: Identificador", "pt: Identificador"):
        assert expected in message


# --- Moodle comments kept whole ------------------------------------------------------------------------

EN_HEADER = WORKSHEETS["en"][0]


def _worksheet(path: Path, comment: str) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write(EN_HEADER + "\n")
        csv.writer(f, lineterminator="\n").writerow(["Participant 1001", "Bob Smith", "bob@example.org", "Submitted",
                                                     "", "100.00", "Yes", "-", "-", comment])
    return path


def test_a_comment_typed_after_the_summary_is_kept_through_two_imports(tmp_path: Path) -> None:
    first = read_roster(_worksheet(tmp_path / "w1.csv", "<p>Good start.</p>"), None)
    cell = _rows(lms_import_text(first, match(first, [_result("Bob Smith", "1001", 2)]), 4))[0]["Feedback comments"]
    assert cell.startswith("<p>Good start.</p> Automatic grading: 2 / 4 points")
    # the instructor imports it, types a sentence after the summary in Moodle, and downloads a fresh worksheet
    second = read_roster(_worksheet(tmp_path / "w2.csv", cell + " <p>Come to office hours.</p>"), None)
    cell = _rows(lms_import_text(second, match(second, [_result("Bob Smith", "1001", 4)]), 4))[0]["Feedback comments"]
    assert cell.startswith("<p>Good start.</p> Automatic grading: 4 / 4 points")
    assert cell.endswith("Your feedback file has the details. <p>Come to office hours.</p>")  # before: dropped
    assert cell.count("Automatic grading:") == 1
    third = read_roster(_worksheet(tmp_path / "w3.csv", cell), None)
    again = _rows(lms_import_text(third, match(third, [_result("Bob Smith", "1001", 4)]), 4))[0]["Feedback comments"]
    assert again == cell  # nothing changed: the same comment, nothing repeated


# --- written answers still to grade ------------------------------------------------------------------


def test_pending_written_answers_leave_the_moodle_grade_empty_unless_asked(tmp_path: Path) -> None:
    roster = read_roster(_worksheet(tmp_path / "w.csv", ""), None)
    matched = match(roster, [_result("Bob Smith", "1001", 2, written=True)])
    row = _rows(lms_import_text(roster, matched, 6))[0]
    assert row["Grade"] == ""  # before: 33.33, a failing grade the learner sees
    assert "Your grade is entered once the written answers are graded." in row["Feedback comments"]
    assert _rows(lms_import_text(roster, matched, 6, partial=True))[0]["Grade"] == "33.33"
    out = tmp_path / "out"
    out.mkdir()
    write_lms_import(out, roster, matched, 6)
    assert any("still to grade by hand" in note and "--partial-grades" in note for note in roster.notes)


def test_pending_written_answers_leave_the_canvas_row_out_unless_asked(tmp_path: Path) -> None:
    path = tmp_path / "gradebook.csv"
    path.write_text(CANVAS_HEADER + "    Points Possible,,,,,6,\n\"Smith, Bob\",340934,S1,bsmith,A,,50\n"
                    "\"Jones, Amy\",412233,S2,ajones,A,,60\n")
    roster = read_roster(path, "Attention homework")
    matched = match(roster, [_result("bob", "340934", 2, written=True), _result("amy", "412233", 4)])
    assert [row["ID"] for row in _rows(lms_import_text(roster, matched, 6))] == ["", "412233"]
    rows = _rows(lms_import_text(roster, matched, 6, partial=True))
    assert [(row["ID"], row["Attention homework (98765)"]) for row in rows] == [("", "6"), ("340934", "2"),
                                                                               ("412233", "4")]


# --- Moodle's late status ------------------------------------------------------------------------------


def test_moodle_s_late_status_reaches_the_learner_and_the_summary(tmp_path: Path) -> None:
    header, participant, late = WORKSHEETS["de"]
    path = tmp_path / "worksheet.csv"
    path.write_text(header + "\n" + f'{participant} 1001,Bob Smith,bob@example.org,{late},,"100,00",Ja,-,-,\n'
                    f'{participant} 1002,Amy Jones,amy@example.org,Zur Bewertung abgegeben,,"100,00",Ja,-,-,\n')
    roster = read_roster(path, None)
    bob, amy = Learner("Bob Smith", "bob", lms_id="1001"), Learner("Amy Jones", "amy", lms_id="1002")
    assert mark_late([bob, amy], roster) == [bob]  # before: Moodle's late status was ignored
    assert bob.late and not amy.late and LATE_NOTE in bob.notes
    results = [_result("Bob_Smith_1001", "1001", 4), _result("Amy_Jones_1002", "1002", 4)]
    write_gradebook(tmp_path / "out", results, Isolation("bubblewrap", "s"), Limits(cpu_seconds=2), 1, roster=roster)
    with open(tmp_path / "out" / "summary.csv", newline="", encoding="utf-8") as f:
        notes = {row["lms_id"]: row["notes"] for row in csv.DictReader(f)}
    assert notes == {"1001": "late", "1002": ""}
