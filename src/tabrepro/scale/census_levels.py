"""The categorical levels of UCI Census-Income (KDD), as census-income.names lists them.

The stand-in draws its categorical values from exactly these levels, so a prepared stand-in has
the real table's one-hot widths (the part of preprocessing whose memory grows with the data).
Keys are the registry's column names (datasets.yaml, census_income_kdd).
"""

from __future__ import annotations

_COUNTRIES = (
    "United-States", "Mexico", "Puerto-Rico", "Dominican-Republic", "Jamaica", "Cuba", "Portugal",
    "Nicaragua", "Peru", "Ecuador", "Guatemala", "Philippines", "Canada", "Columbia", "El-Salvador",
    "Japan", "England", "Trinadad&Tobago", "Honduras", "Germany", "Taiwan",
    "Outlying-U S (Guam USVI etc)", "India", "Vietnam", "China", "Hong Kong", "Cambodia", "France",
    "Laos", "Haiti", "South Korea", "Iran", "Greece", "Italy", "Poland", "Thailand", "Yugoslavia",
    "Holand-Netherlands", "Ireland", "Scotland", "Hungary", "Panama",
)
_STATES = (
    "Not in universe", "Utah", "Michigan", "North Carolina", "North Dakota", "Virginia", "Vermont",
    "Wyoming", "West Virginia", "Pennsylvania", "Abroad", "Oregon", "California", "Iowa", "Florida",
    "Arkansas", "Texas", "South Carolina", "Arizona", "Indiana", "Tennessee", "Maine", "Alaska",
    "Ohio", "Montana", "Nebraska", "Mississippi", "District of Columbia", "Minnesota", "Illinois",
    "Kentucky", "Delaware", "Colorado", "Maryland", "Wisconsin", "New Hampshire", "Nevada",
    "New York", "Georgia", "Oklahoma", "New Mexico", "South Dakota", "Missouri", "Kansas",
    "Connecticut", "Louisiana", "Alabama", "Massachusetts", "Idaho", "New Jersey",
)
_HOUSEHOLD_DETAIL = (
    "Householder", "Spouse of householder", "Child <18 never marr not in subfamily",
    "Child 18+ never marr Not in a subfamily", "Nonfamily householder", "Secondary individual",
    "Other Rel 18+ ever marr not in subfamily", "Grandchild <18 never marr child of subfamily RP",
    "Other Rel 18+ never marr not in subfamily", "Grandchild <18 never marr not in subfamily",
    "Child 18+ ever marr Not in a subfamily", "Child under 18 of RP of unrel subfamily",
    "RP of unrelated subfamily", "Child 18+ ever marr RP of subfamily",
    "Other Rel <18 never marr child of subfamily RP", "Other Rel 18+ ever marr RP of subfamily",
    "Other Rel <18 never marr not in subfamily", "Child 18+ never marr RP of subfamily",
    "In group quarters", "Child 18+ spouse of subfamily RP", "Other Rel 18+ spouse of subfamily RP",
    "Child <18 never marr RP of subfamily", "Other Rel 18+ never marr RP of subfamily",
    "Grandchild 18+ never marr not in subfamily", "Spouse of RP of unrelated subfamily",
    "Child <18 ever marr not in subfamily", "Grandchild <18 never marr RP of subfamily",
    "Child <18 ever marr RP of subfamily", "Other Rel <18 never married RP of subfamily",
    "Grandchild 18+ ever marr not in subfamily", "Child <18 spouse of subfamily RP",
    "Other Rel <18 ever marr RP of subfamily", "Other Rel <18 ever marr not in subfamily",
    "Other Rel <18 spouse of subfamily RP", "Grandchild 18+ ever marr RP of subfamily",
    "Grandchild 18+ never marr RP of subfamily", "Grandchild <18 ever marr not in subfamily",
    "Grandchild 18+ spouse of subfamily RP",
)

# Ordered roughly from most to least frequent: the generator gives earlier levels more weight.
LEVELS: dict[str, tuple[str, ...]] = {
    "class_of_worker": (
        "Not in universe", "Private", "Self-employed-not incorporated", "Local government",
        "State government", "Self-employed-incorporated", "Federal government", "Never worked",
        "Without pay",
    ),
    "detailed_industry_recode": tuple(str(code) for code in range(52)),
    "detailed_occupation_recode": tuple(str(code) for code in range(47)),
    "education": (
        "High school graduate", "Children", "Some college but no degree", "Bachelors degree(BA AB BS)",
        "7th and 8th grade", "10th grade", "11th grade", "Masters degree(MA MS MEng MEd MSW MBA)",
        "9th grade", "Associates degree-occup /vocational", "Associates degree-academic program",
        "5th or 6th grade", "12th grade no diploma", "1st 2nd 3rd or 4th grade",
        "Prof school degree (MD DDS DVM LLB JD)", "Doctorate degree(PhD EdD)", "Less than 1st grade",
    ),
    "enroll_in_edu_inst_last_wk": ("Not in universe", "High school", "College or university"),
    "marital_status": (
        "Never married", "Married-civilian spouse present", "Divorced", "Widowed", "Separated",
        "Married-spouse absent", "Married-A F spouse present",
    ),
    "major_industry_code": (
        "Not in universe or children", "Retail trade", "Manufacturing-durable goods", "Education",
        "Manufacturing-nondurable goods", "Finance insurance and real estate", "Construction",
        "Business and repair services", "Medical except hospital", "Public administration",
        "Other professional services", "Transportation", "Hospital services", "Wholesale trade",
        "Agriculture", "Personal services except private HH", "Social services",
        "Entertainment", "Communications", "Utilities and sanitary services",
        "Private household services", "Mining", "Forestry and fisheries", "Armed Forces",
    ),
    "major_occupation_code": (
        "Not in universe", "Adm support including clerical", "Professional specialty",
        "Executive admin and managerial", "Other service", "Sales",
        "Precision production craft & repair", "Machine operators assmblrs & inspctrs",
        "Handlers equip cleaners etc ", "Transportation and material moving",
        "Farming forestry and fishing", "Technicians and related support", "Protective services",
        "Private household services", "Armed Forces",
    ),
    "race": ("White", "Black", "Asian or Pacific Islander", "Other", "Amer Indian Aleut or Eskimo"),
    "hispanic_origin": (
        "All other", "Mexican-American", "Mexican (Mexicano)", "Central or South American",
        "Puerto Rican", "Other Spanish", "Cuban", "NA", "Do not know", "Chicano",
    ),
    "sex": ("Female", "Male"),
    "member_of_a_labor_union": ("Not in universe", "No", "Yes"),
    "reason_for_unemployment": (
        "Not in universe", "Other job loser", "Re-entrant", "Job loser - on layoff", "Job leaver",
        "New entrant",
    ),
    "full_or_part_time_employment_stat": (
        "Children or Armed Forces", "Full-time schedules", "Not in labor force",
        "PT for non-econ reasons usually FT", "Unemployed full-time",
        "PT for econ reasons usually PT", "Unemployed part- time", "PT for econ reasons usually FT",
    ),
    "tax_filer_status": (
        "Nonfiler", "Joint both under 65", "Single", "Joint both 65+", "Head of household",
        "Joint one under 65 & one 65+",
    ),
    "region_of_previous_residence": ("Not in universe", "South", "West", "Midwest", "Northeast", "Abroad"),
    "state_of_previous_residence": _STATES,
    "detailed_household_and_family_stat": _HOUSEHOLD_DETAIL,
    "detailed_household_summary_in_household": (
        "Householder", "Child under 18 never married", "Spouse of householder",
        "Nonrelative of householder", "Child 18 or older", "Other relative of householder",
        "Group Quarters- Secondary individual", "Child under 18 ever married",
    ),
    "migration_code_change_in_msa": (
        "Nonmover", "MSA to MSA", "NonMSA to nonMSA", "Not in universe", "MSA to nonMSA",
        "NonMSA to MSA", "Abroad to MSA", "Not identifiable", "Abroad to nonMSA",
    ),
    "migration_code_change_in_reg": (
        "Nonmover", "Same county", "Different county same state", "Not in universe",
        "Different region", "Different state same division", "Abroad",
        "Different division same region",
    ),
    "migration_code_move_within_reg": (
        "Nonmover", "Same county", "Different county same state", "Not in universe",
        "Different state in South", "Different state in West", "Different state in Midwest",
        "Abroad", "Different state in Northeast",
    ),
    "live_in_this_house_1_year_ago": ("Not in universe under 1 year old", "Yes", "No"),
    "migration_prev_res_in_sunbelt": ("Not in universe", "No", "Yes"),
    "family_members_under_18": (
        "Not in universe", "Both parents present", "Mother only present", "Father only present",
        "Neither parent present",
    ),
    "country_of_birth_father": _COUNTRIES,
    "country_of_birth_mother": _COUNTRIES,
    "country_of_birth_self": _COUNTRIES,
    "citizenship": (
        "Native- Born in the United States", "Foreign born- Not a citizen of U S ",
        "Foreign born- U S citizen by naturalization", "Native- Born abroad of American Parent(s)",
        "Native- Born in Puerto Rico or U S Outlying",
    ),
    "own_business_or_self_employed": ("0", "2", "1"),
    "fill_inc_questionnaire_for_veterans_admin": ("Not in universe", "No", "Yes"),
    "veterans_benefits": ("2", "0", "1"),
    "year": ("94", "95"),
}

# Share of '?' (missing) per column, about as in census-income.data: the four migration columns
# were not asked in one of the two survey years.
MISSING_RATE: dict[str, float] = {
    "migration_code_change_in_msa": 0.50,
    "migration_code_change_in_reg": 0.50,
    "migration_code_move_within_reg": 0.50,
    "migration_prev_res_in_sunbelt": 0.50,
    "country_of_birth_father": 0.034,
    "country_of_birth_mother": 0.031,
    "country_of_birth_self": 0.017,
    "state_of_previous_residence": 0.0035,
}

LABELS = ("- 50000.", "50000+.")  # the label spellings of both files (the registry strips the '.')
