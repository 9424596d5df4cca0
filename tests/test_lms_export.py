"""`handson classroom export --lms moodle|canvas`: the gradebook in each LMS's import format (quick tier).

The expected files are written here from the two LMSs' documentation, not from the code:

- Moodle, "Grade import" (docs.moodle.org): "The import file format is the same as the
  corresponding export format"; the CSV export's columns are First name, Last name, ID number,
  (Institution, Department,) Email address, then one column per grade item; on import the
  instructor maps an identifier ("Map from" Email address -> "Map to" useremail, or ID number ->
  useridnumber) and each column to a grade item. Encoding UTF-8, comma-separated.
- Canvas, "How do I import grades in the Gradebook?" (Instructure's guides): the CSV needs the
  student columns Student (Last, First), ID, SIS User ID, SIS Login ID, Section, then one column
  per assignment (a column without a Canvas id makes a new assignment), and the row of points
  that the gradebook export writes second ("    Points Possible"). UTF-8.
"""

import csv
import io

import pytest

from handson_lib.classroom import lms_export

MAPPING = """account,first_name,last_name,email,id_number,lms_id,sis_user_id,sis_login_id,section
student01,Hanako,Yamada,hanako@example.ac.jp,S001,101,u-001,hanako,Morning
student02,Taro,=Suzuki,taro@example.ac.jp,S002,102,u-002,taro,Morning
student03,José,Núñez,jose@example.ac.jp,S003,103,u-003,jose,Afternoon
"""
GRADES = lms_export.Grades(("setup", "task1"), {"setup": 3.0, "task1": 7.0},
                           {"student01": {"setup": 3.0, "task1": 6.5}, "student02": {"task1": 0.0},
                            "student09": {"setup": 1.0}})

MOODLE_FROM_THE_DOCS = (
    "First name,Last name,ID number,Email address,setup,task1\r\n"
    "Hanako,Yamada,S001,hanako@example.ac.jp,3,6.5\r\n"
    "Taro,'=Suzuki,S002,taro@example.ac.jp,,0\r\n"
    "José,Núñez,S003,jose@example.ac.jp,,\r\n")
CANVAS_FROM_THE_DOCS = (
    "Student,ID,SIS User ID,SIS Login ID,Section,setup,task1\r\n"
    "    Points Possible,,,,,3,7\r\n"
    "\"Yamada, Hanako\",101,u-001,hanako,Morning,3,6.5\r\n"
    "\"'=Suzuki, Taro\",102,u-002,taro,Morning,,0\r\n"
    "\"Núñez, José\",103,u-003,jose,Afternoon,,\r\n")


@pytest.mark.parametrize("lms, expected", [("moodle", MOODLE_FROM_THE_DOCS), ("canvas", CANVAS_FROM_THE_DOCS)])
def test_each_file_is_the_lms_import_format(lms, expected):
    text = lms_export.export_text(lms, GRADES, lms_export.read_mapping(MAPPING))
    assert text == expected
    data = text.encode("utf-8")
    assert not data.startswith(b"\xef\xbb\xbf")   # UTF-8 without a byte order mark
    assert data.decode("utf-8") == expected


def test_a_name_that_a_spreadsheet_would_run_is_neutralised_and_numbers_stay_numbers():
    rows = list(csv.reader(io.StringIO(lms_export.export_text("moodle", GRADES, lms_export.read_mapping(MAPPING)))))
    assert rows[2][1] == "'=Suzuki" and rows[2][5] == "0"
    assert all(not cell.startswith(("=", "+", "-", "@")) for row in rows for cell in row)


def test_graded_students_missing_from_the_mapping_are_named_not_exported():
    mapping = lms_export.read_mapping(MAPPING)
    assert lms_export.missing(GRADES, mapping) == ["student09"]
    assert "student09" not in lms_export.export_text("canvas", GRADES, mapping)


@pytest.mark.parametrize("text, words", [
    ("name,email\nstudent01,a@b\n", "needs an 'account' column"),
    ("account,nickname\nstudent01,x\n", "unknown column(s) in the mapping file: nickname"),
    ("account\nstudent01\nstudent01\n", "student01 is in the mapping file twice"),
])
def test_a_mapping_file_that_cannot_be_used_says_why(text, words):
    with pytest.raises(lms_export.MappingError, match=words.replace("(", r"\(").replace(")", r"\)")):
        lms_export.read_mapping(text)


def test_a_mapping_saved_by_a_spreadsheet_with_a_byte_order_mark_reads():
    assert lms_export.read_mapping("\ufeffaccount,email\nstudent01,a@b\n") == [{"account": "student01", "email": "a@b"}]
