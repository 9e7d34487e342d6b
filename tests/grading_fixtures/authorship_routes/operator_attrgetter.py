# operator.attrgetter of a dotted path kept in one string.
import operator

import andrea_course as course

E = operator.attrgetter("pie" "ces.attention")(course)
